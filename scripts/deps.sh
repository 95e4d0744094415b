#!/usr/bin/env bash
# Install everything btrfsimg needs to build, test and fuzz (Debian 12).
# Runs apt-get only when a package is missing. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config python3 time
      libzstd-dev zlib1g-dev liblzo2-dev libxxhash-dev libsodium-dev libisal-dev libssl-dev
      libcmocka-dev
      btrfs-progs zstd fdisk util-linux
      sleuthkit jq  # the tools users pair btrfsimg with: tests run mactime and jq
      libewf-dev libqcow-dev libvmdk-dev libvhdi-dev  # evidence containers (E01, qcow2, VMDK, VHD/X)
      libbfio-dev  # the file IO handles the VMDK and EWF readers give libvmdk and libewf
      ewf-tools qemu-utils  # tests build containers with the formats' own tools
      libargon2-dev libjson-c-dev  # LUKS2 keyslots and metadata (crypto itself: OpenSSL)
      liburing-dev  # a tree's leaves read through the page cache, many at once
      lvm2 cryptsetup-bin grub-common python3-libluksde  # LVM/LUKS test images and their truth
      libxml2-dev libxml2-utils  # dfxml: its writer, and xmllint to check it on the schema
      libfuse3-dev fuse3 rsync  # btrfsimg mount, and the tool study run under it
      python3-dev python3-mesonpy python3-pytest  # the Python binding and its tests
      python3-pip patchelf  # pip install --no-build-isolation: meson-python 0.12 runs patchelf
      clang libclang-rt-14-dev llvm)  # llvm: llvm-profdata, llvm-cov (scripts/coverage.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
