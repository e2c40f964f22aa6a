#!/bin/sh
# map.sh INPUT MAP REDUCERS
#
# Counts the words of INPUT and splits the counts by a hash of the word into REDUCERS
# blocks: $DOCKHAND_OUTPUT_DIR/shuffle_0_<MAP>_<r> holds "word count" lines for the words
# that hash to r (every block exists, possibly empty). The agent stores each file of
# DOCKHAND_OUTPUT_DIR as a block once the task has finished.
set -eu
input=$1
map=$2
reducers=$3
out=${DOCKHAND_OUTPUT_DIR:?the agent sets DOCKHAND_OUTPUT_DIR for every task}

# Long enough that a decommission started a moment after the job can catch maps running.
sleep "${MAP_SECONDS:-1}"

tr -s '[:space:]' '\n' <"$input" | grep -v '^$' | sort | uniq -c |
  awk -v dir="$out" -v map="$map" -v n="$reducers" '
    BEGIN {
      chars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?-_()[]{}\"'\''"
      for (r = 0; r < n; r++) { file[r] = dir "/shuffle_0_" map "_" r; printf "" > file[r] }
    }
    {
      h = 0
      for (i = 1; i <= length($2); i++) h = (h * 31 + index(chars, substr($2, i, 1))) % 65521
      print $2, $1 > file[h % n]
    }'
