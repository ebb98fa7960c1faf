#pragma once

#include <string>
#include <vector>

#include "client/connect/environment.h"

namespace flopscope::client {

// Whether `command` runs a Python program, so that `flopscope run` turns `--torch` on by itself
// (issue 32 item 1): its program's name is python, python3, python3.11, ... or torchrun, or ends
// in .py; or the program (found on $PATH of `env` when its name has no '/') is a script whose
// shebang line names python (`#!/usr/bin/env python3`: accelerate, deepspeed, a train.py made
// executable). An unreadable or missing program is not Python.
bool IsPythonProgram(const std::vector<std::string>& command, const Environment& env);

// The shebang test alone: `first_bytes` are a file's first bytes.
bool ShebangNamesPython(const std::string& first_bytes);

}  // namespace flopscope::client
