#!/usr/bin/env python3
"""The pages SPLASH-2 LU (splash2/lu, non-contiguous) must move between
clusters that each keep one copy (copy = cluster), whatever the protocol.

    bench/lu-floor.py [--distinct] [N [P [PER_CLUSTER [B]]]]
                                  (default 1024 16 8 16)

With --distinct it prints only the bytes of the distinct pages that must
cross (bench/targets.sh's baseline for the bytes between the clusters).

Replays LU's accesses block by block: rank 0 fills the matrix before the
workers start; then per step K the owner of the diagonal block factors
it; owners of row K and column K read it and divide their blocks; the
owners of the trailing blocks read their row's and column's perimeter
block and update their own; a barrier after each phase.  The matrix is
column-major and page-aligned, so a page is part of one column.  A
cluster reading (or writing part of) a page whose newest version another
cluster wrote needs that version brought in once: one page down from the
home.  Each version brought to anyone needs one page up to the home.
Both hops are what `cluster_bytes_sent` counts (docs/performance.md,
"Bytes between the clusters against LU's floor").  Whole pages, no
headers: diffs could go below it only where a page crosses again within
a step (the diagonal's page, read before its column is divided)."""
import math
import sys

PAGE_BYTES = 4096


def floor(n, b, nprocs, per_cluster):
    nb = n // b
    rows = math.isqrt(nprocs)
    while nprocs % rows:
        rows -= 1
    cols = nprocs // rows
    per_page = PAGE_BYTES // 8

    def owner(i, j):  # splash2/lu/lu.C block_owner
        return (i % cols) + (j % rows) * cols

    def cluster(rank):
        return rank // per_cluster

    def pages(i, j):
        out = set()
        for col in range(j * b, (j + 1) * b):
            first = col * n + i * b
            out.update(range(first // per_page,
                             (first + b - 1) // per_page + 1))
        return out

    version = {}   # page -> newest version
    held = {}      # (cluster, page) -> version that cluster holds
    written = {}   # page -> clusters that wrote it this epoch
    down = 0
    up = set()     # (page, version) pairs some cluster brought in
    distinct = set()

    def read(c, pg):
        nonlocal down
        v = version.get(pg, 0)
        if held.get((c, pg), 0) < v:
            down += 1
            up.add((pg, v))
            distinct.add(pg)
            held[(c, pg)] = v

    def write(c, pg):
        read(c, pg)  # the page's other bytes come first
        written.setdefault(pg, set()).add(c)

    def barrier():
        for pg, cs in written.items():
            if len(cs) > 1:
                sys.exit("page %d written by clusters %s in one epoch: "
                         "the model assumes one writer cluster" % (pg, cs))
            version[pg] = version.get(pg, 0) + 1
            for c in cs:
                held[(c, pg)] = version[pg]
        written.clear()

    for i in range(nb):
        for j in range(nb):
            for pg in pages(i, j):
                write(0, pg)
    barrier()
    for k in range(nb):
        for pg in pages(k, k):
            write(cluster(owner(k, k)), pg)
        barrier()
        perimeter = [(i, k) for i in range(k + 1, nb)] + \
                    [(k, j) for j in range(k + 1, nb)]
        for i, j in perimeter:
            c = cluster(owner(i, j))
            for pg in pages(k, k):
                read(c, pg)
            for pg in pages(i, j):
                write(c, pg)
        barrier()
        for i in range(k + 1, nb):
            for j in range(k + 1, nb):
                c = cluster(owner(i, j))
                for pg in pages(i, k) | pages(k, j):
                    read(c, pg)
                for pg in pages(i, j):
                    write(c, pg)
        barrier()
    return len(up), down, len(distinct)


def main():
    words = sys.argv[1:]
    only_distinct = bool(words) and words[0] == "--distinct"
    if only_distinct:
        words = words[1:]
    try:
        args = [int(a) for a in words]
    except ValueError:
        sys.exit("lu-floor.py: N, P, PER_CLUSTER and B are whole numbers")
    if len(args) > 4 or any(a <= 0 for a in args):
        sys.exit("usage: lu-floor.py [--distinct] [N [P [PER_CLUSTER [B]]]]")
    n, nprocs, per, b = (args + [1024, 16, 8, 16][len(args):])[:4]
    if nprocs % per or n % b:
        sys.exit("lu-floor.py: P must be a multiple of PER_CLUSTER and N "
                 "of B (the model has no partial blocks)")
    up, down, distinct = floor(n, b, nprocs, per)
    if only_distinct:
        print(distinct * PAGE_BYTES)
        return
    mb = PAGE_BYTES / 1e6
    print("LU n=%d b=%d, %d processes, %d per cluster: %d pages up, %d "
          "down (%.1f MB over both hops), %d distinct pages (%.1f MB)"
          % (n, b, nprocs, per, up, down, (up + down) * mb, distinct,
             distinct * mb))


if __name__ == "__main__":
    main()
