#!/bin/sh
# A resource discovery script (Spark's format, for the `script` plugin): the GPUs the NVIDIA
# device plugin gave this container, read from NVIDIA_VISIBLE_DEVICES.
#
# The device plugin sets NVIDIA_VISIBLE_DEVICES to the GPUs it allocated to the container
# (their UUIDs or indexes, comma-separated), and the NVIDIA container runtime shows the
# container only those, numbered 0..n-1. So the addresses are 0..n-1, what CUDA_VISIBLE_DEVICES
# (which the agent gives each task) takes inside the container.
#   "none", "void", "" or unset: no GPU;
#   "all": every GPU of the node, counted with `nvidia-smi -L` (no nvidia-smi: an error).
# Prints {"name": "gpu", "addresses": [...]} on stdout; errors on stderr, exit 1.
# DOCKHAND_GPU_RESOURCE names the resource (default "gpu").
set -eu
name="${DOCKHAND_GPU_RESOURCE:-gpu}"
devices="${NVIDIA_VISIBLE_DEVICES:-}"

count=0
case "$devices" in
  "" | none | void)
    count=0
    ;;
  all)
    if ! command -v nvidia-smi >/dev/null 2>&1; then
      echo "NVIDIA_VISIBLE_DEVICES=all and no nvidia-smi to count the GPUs" >&2
      exit 1
    fi
    count=$(nvidia-smi -L | grep -c '^GPU ' || true)
    ;;
  *)
    old_ifs=$IFS
    IFS=,
    for device in $devices; do
      if [ -z "$device" ]; then
        echo "NVIDIA_VISIBLE_DEVICES='$devices' has an empty entry" >&2
        exit 1
      fi
      count=$((count + 1))
    done
    IFS=$old_ifs
    ;;
esac

addresses=""
i=0
while [ "$i" -lt "$count" ]; do
  [ -z "$addresses" ] || addresses="$addresses, "
  addresses="$addresses\"$i\""
  i=$((i + 1))
done
printf '{"name": "%s", "addresses": [%s]}\n' "$name" "$addresses"
