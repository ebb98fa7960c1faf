#!/usr/bin/env bash
# The torch 2 test environment (docs/testing.md): scripts/setup_torch_env.sh torch2 [--relock].
exec "$(dirname "$0")/setup_torch_env.sh" torch2 "$@"
