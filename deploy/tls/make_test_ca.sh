#!/usr/bin/env bash
# Makes a test certificate authority and the certificates flopscope's mutual TLS uses, with
# openssl (EC P-256 keys, 30 days). For tests and trying things out; a cluster's real CA issues
# its own (docs/architecture.md, "Access model": what each certificate's subject means).
#
#   deploy/tls/make_test_ca.sh DIR [--person NAME]... [--san SAN]...
#
# Writes into DIR (created, mode 0700; keys 0600):
#   ca.pem, ca.key                 the test CA: give ca.pem to every --tls-ca
#   daemon.pem, daemon.key         a daemon's serving certificate: CN=flopscoped, SAN
#                                  IP:127.0.0.1, DNS:localhost and each --san (e.g. DNS:agg1,
#                                  IP:10.0.0.5): `flopscoped --tcp ... --tls-cert daemon.pem`
#   node.pem, node.key             a node daemon's certificate (OU=flopscope-node): may only
#                                  forward its node's sessions to an aggregator
#   person-NAME.pem, .key          a person's certificate (CN=NAME, one per --person; default:
#                                  the user running this): that local user's access
#   other-ca.pem, other-ca.key     a second, unrelated CA, and
#   other-person.pem, .key         a certificate it signed (CN=root): every daemon must refuse it
set -euo pipefail

usage() { echo "usage: $0 DIR [--person NAME]... [--san SAN]..." >&2; exit 2; }
[[ $# -ge 1 && "$1" != -* ]] || usage
readonly DIR=$1
shift
persons=()
sans=("IP:127.0.0.1" "DNS:localhost")
while [[ $# -gt 0 ]]; do
  case "$1" in
    --person) [[ $# -ge 2 ]] || usage; persons+=("$2"); shift 2 ;;
    --san) [[ $# -ge 2 ]] || usage; sans+=("$2"); shift 2 ;;
    *) usage ;;
  esac
done
[[ ${#persons[@]} -gt 0 ]] || persons=("$(id -un)")
command -v openssl >/dev/null || { echo "$0: needs openssl (apt-get install openssl)" >&2; exit 1; }

umask 077
mkdir -p "$DIR"
cd "$DIR"

# new_key NAME: an EC P-256 private key in NAME.key.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

# new_ca NAME SUBJECT: a self-signed CA certificate NAME.pem.
new_ca() {
  new_key "$1"
  openssl req -x509 -new -key "$1.key" -subj "$2" -days 30 -out "$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# issue CA NAME SUBJECT USAGES [SAN]: NAME.pem signed by CA, for extendedKeyUsage USAGES.
issue() {
  local ca=$1 name=$2 subject=$3 usages=$4 san=${5:-}
  new_key "$name"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$usages"
    [[ -z "$san" ]] || echo "subjectAltName=$san"
  } >"$name.ext"
  openssl req -new -key "$name.key" -subj "$subject" |
    openssl x509 -req -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial -days 30 \
      -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.ext"
}

new_ca ca "/O=flopscope test/CN=flopscope test CA"
san_list=$(IFS=,; echo "${sans[*]}")
issue ca daemon "/O=flopscope test/CN=flopscoped" serverAuth,clientAuth "$san_list"
issue ca node "/O=flopscope test/OU=flopscope-node/CN=node-$(hostname -s)" \
  serverAuth,clientAuth "$san_list"
for person in "${persons[@]}"; do
  issue ca "person-$person" "/O=flopscope test/CN=$person" clientAuth
done
new_ca other-ca "/O=someone else/CN=another CA"
issue other-ca other-person "/O=someone else/CN=root" clientAuth
rm -f ./*.srl
echo "test CA and certificates in $(pwd): ca.pem daemon.pem node.pem" \
  "$(printf 'person-%s.pem ' "${persons[@]}")other-person.pem"
