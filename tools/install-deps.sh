#!/bin/sh
# Installs the Debian packages Lemuria builds against (see debian-packages).
set -eu
here=$(dirname "$0")
pkgs=$(grep -v '^#' "$here/debian-packages" | tr '\n' ' ')
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
echo "installing Debian packages: $pkgs"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $pkgs
