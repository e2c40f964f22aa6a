#!/bin/sh
# reduce.sh REDUCE MAPS
#
# Adds up the counts that every map wrote for this reducer: the blocks
# shuffle_0_<m>_<REDUCE> for m in 0..MAPS-1, fetched by the agent into $DOCKHAND_INPUT_DIR
# before the task started. Prints the number of words that hash to this reducer.
set -eu
reduce=$1
maps=$2
in=${DOCKHAND_INPUT_DIR:?the agent sets DOCKHAND_INPUT_DIR for tasks with inputs}

m=0
files=""
while [ "$m" -lt "$maps" ]; do
  files="$files $in/shuffle_0_${m}_${reduce}"
  m=$((m + 1))
done
# shellcheck disable=SC2086 # one word per file on purpose
cat $files | awk '{ total += $2 } END { print total + 0 }'
