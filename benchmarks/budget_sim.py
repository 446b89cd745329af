"""The judge budget against every kind of server, on a virtual clock (issue 28): one table.

Each cell of the matrix (:func:`judgeq.testing.budget_sim.matrix`) runs the real budget (the Lua
scripts Redis runs, in process) and the real retry loop of the workers against a modelled
server, deterministically: a simulated hour takes about a second, and nothing depends on the
machine's speed. Columns:

* ``used`` -- the binding limit (the server's, or a lower one given) used after the first
  minute, while jobs waited;
* ``429s`` -- requests answered 429 for the limits (those of jobs refused for themselves, and
  an outage's, left out);
* ``worst`` -- the least used 60-s window after the first minute while jobs waited;
* ``rl`` -- clean jobs that ended ``rate_limited``;
* ``wall/ideal`` -- wall time against the time the jobs take at exactly the binding limit (a
  server's first minute may allow a burst: below 1 is possible);
* ``holds`` -- ``yes``, or the thresholds of issue 28 the cell misses.

    python benchmarks/budget_sim.py [--cells SUBSTRING,...] [--processes 2]

Exit 0 when every cell holds, 1 otherwise (``tests/core/test_budget_sim.py`` holds each cell
that held when it was written, and marks the others as known misses).
"""

from __future__ import annotations

import argparse
import sys
import time

from judgeq.testing.budget_sim import matrix, run_all, table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default="", help="run only the cells whose name contains one of these")
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    wanted = [w for w in args.cells.split(",") if w]
    cells = [c for c in matrix() if not wanted or any(w in c.name for w in wanted)]
    start = time.perf_counter()
    results = run_all(cells, processes=args.processes)
    for line in table(results):
        print(line)
    held = sum(not c.failures() for c in results)
    print(f"\n{held} of {len(results)} cells hold; the matrix took {time.perf_counter() - start:.1f} s")
    return 0 if held == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
