#!/usr/bin/python3
"""The no-op workload of dockhand-bench, on Dask: Client.map of a no-op over a LocalCluster of
one worker process with two threads (the two cores of `--cores 2`), then single tasks one after
the other (submit().result()) for the round trip. Prints one JSON line; run by dockhand-bench
when Debian's python3-distributed is installed.

usage: dask_noop.py TASKS ROUNDS
"""
import json
import statistics
import sys
import time

import distributed
from distributed import Client, LocalCluster


def noop(i):
    return i


def main():
    tasks = int(sys.argv[1])
    rounds = int(sys.argv[2])
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.gather(client.map(noop, range(100), pure=False))  # warm up, as the agent is
        start = time.perf_counter()
        client.gather(client.map(noop, range(tasks), pure=False))
        wall = time.perf_counter() - start
        trips = []
        for i in range(rounds):
            t0 = time.perf_counter()
            client.submit(noop, i, pure=False).result()
            trips.append((time.perf_counter() - t0) * 1e6)
    print(json.dumps({"dask": True, "version": distributed.__version__, "tasks": tasks,
                      "wall_s": wall, "per_s": tasks / wall,
                      "round_trip_median_us": statistics.median(trips)}))


if __name__ == "__main__":
    main()
