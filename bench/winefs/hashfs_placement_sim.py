"""Design study for issue 15, item 2 (a HashFS placement that keeps 2 MiB extents), not the
file system: a linear-probing table of SLOTS slots filled with files from Geriatrix's
Agrawal size profile to a target load, under two home functions:

- paper: home(ino, lblk) = H(ino, lblk) mod SLOTS (HashFS as published);
- grouped: files of 2 MiB or more get home = 512 * H(ino, lblk // 512) + lblk % 512 (each
  2 MiB of the file aimed at one aligned group of 512 slots), smaller files the paper's.

Printed per load: mean and 99th-percentile probe length of a lookup, and the share of the
large files' 2 MiB chunks that land on one aligned group in order (what 2 MiB pages need).
One JSON line per (placement, load).

    python3 bench/winefs/hashfs_placement_sim.py [SLOTS] [SEED]
"""
import json
import random
import sys

SLOTS = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 1
from aging_sim import AGRAWAL, h


def run(placement, load, seed):
    rnd = random.Random(seed)
    table = [None] * SLOTS
    groups = SLOTS // 512
    sizes, weights = zip(*AGRAWAL)
    used, ino, files = 0, 0, []
    while used < load * SLOTS:
        ino += 1
        blocks = max(1, rnd.choices(sizes, weights)[0] // 4096)
        if used + blocks > load * SLOTS:
            break
        big = placement == "grouped" and blocks >= 512
        homes = []
        for l in range(blocks):
            if big:
                home = 512 * (h(ino << 32 | l // 512) % groups) + l % 512
            else:
                home = h(ino << 32 | l) % SLOTS
            s = home
            while table[s] is not None:
                s = (s + 1) % SLOTS
            table[s] = (ino, l)
            homes.append((home, s))
        used += blocks
        files.append((blocks, homes))
    probes = sorted((s - home) % SLOTS + 1 for _, hs in files for home, s in hs)
    chunks = aligned = 0
    for blocks, hs in files:
        for c in range(blocks // 512):
            chunks += 1
            first = hs[c * 512][1]
            aligned += first % 512 == 0 and all(hs[c * 512 + i][1] == first + i for i in range(512))
    return {
        "placement": placement, "load": load, "slots": SLOTS, "seed": seed,
        "probe_mean": sum(probes) / len(probes), "probe_p99": probes[int(0.99 * (len(probes) - 1))],
        "big_chunks": chunks, "big_chunks_aligned": aligned,
    }


for load in (0.5, 0.8, 0.9, 0.95):
    for placement in ("paper", "grouped"):
        print(json.dumps(run(placement, load, SEED)), flush=True)
