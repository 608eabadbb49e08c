"""Design study for issue 15, item 2 (not the file system): a HashFS placement whose small keys
live in a region of whole groups that grows one group at a time. The region is an ordered
list of 'open' groups; a small key's group is its jump consistent hash (Lamping and Veach)
over the list's length, its slot in the group its own hash, probing linearly inside the group
(spilling into the next open group only when it is full). When the small keys pass the
target load a free group is opened, and the keys whose jump bucket becomes the new one move
there (consistent hashing: about one group's worth; no other key moves), so a lookup reads
one group. Large files' whole chunks claim free groups outside the region. Same aging as
hashfs_grouped_aging_sim.py (Agrawal sizes, to 75%, one capacity of churn, seed 7, 2^18
slots), then one file of 1/8 of the table; the paper's placement under the same aging for
comparison. Deletes free slots outright (no tombstones) in every variant. One JSON line per
variant: python3 bench/winefs/hashfs_jump_regions_sim.py"""
import json, random
SLOTS = 1 << 18; G = SLOTS // 512
from aging_sim import MASK, age, h
def jump_seq(key, n):
    """Lamping-Veach jump hash: every bucket the key takes as the count grows to n, in order."""
    k = h(key ^ 0x5851F42D4C957F2D); b, j, out = -1, 0, []
    while j < n:
        b = j; out.append(b)
        k = (k * 2862933555777941757 + 1) & MASK
        j = int((b + 1) * ((1 << 31) / ((k >> 33) + 1)))
    return out
def run(target=0.85, seed=7, to=0.75, churn=1.0, final=64):
    rnd = random.Random(seed)
    table = [0] * SLOTS; claimed = [False] * G; opened = [False] * G
    perm = []; where = {}; small = 0
    st = {"opens": 0, "claims": 0, "claims_failed": 0, "moves": 0, "spilled": 0}
    def open_group():
        g = next((g for g in range(G) if not claimed[g] and not opened[g] and all(table[s] == 0 for s in range(g*512, g*512+512))), None)
        if g is None: return False
        opened[g] = True; perm.append(g); st["opens"] += 1
        n = len(perm)
        # keys whose bucket is now the new group move there (spilled keys re-placed too)
        movers = [k for k, s in where.items() if jump_seq(k, n)[-1] == n - 1 or not in_bucket(k, s, n - 1)]
        for k in movers:
            s = where.pop(k); table[s] = 0; place(k, n)
            st["moves"] += 1
        return True
    def slot_in(g, key):
        return g * 512 + (h(key) & 511)
    def in_bucket(k, s, n_old):
        """Whether key k at slot s is in its own bucket's group (not spilled) under n_old groups."""
        return perm[jump_seq(k, n_old)[-1]] == s // 512
    def place(key, n):
        b = jump_seq(key, n)[-1]
        for i in range(n):
            g = perm[(b + i) % n]; s = slot_in(g, key)
            for _ in range(512):
                if table[s] == 0:
                    table[s] = key; where[key] = s
                    if i: st["spilled"] += 1
                    return s
                s = g * 512 + (s + 1) % 512
        raise SystemExit("small region full")
    def ins(key):
        nonlocal small
        while small + 1 > target * len(perm) * 512:
            if not open_group(): break
        s = place(key, len(perm)); small += 1
        return s
    def claim():
        g = next((g for g in range(G - 1, -1, -1) if not claimed[g] and not opened[g]), None)
        if g is None: st["claims_failed"] += 1; return None
        claimed[g] = True; st["claims"] += 1
        return g
    files = {}; used = 0; ino = 0; written = 0
    def create(blocks):
        nonlocal ino, used, written
        if used + blocks > SLOTS * 0.97: return None
        ino += 1; groups = []; smalls = []
        for c in range(blocks // 512):
            g = claim()
            if g is None: smalls += [(ino << 32) | l for l in range(c*512, c*512+512)]
            else: groups.append(g)
        smalls += [(ino << 32) | l for l in range(blocks // 512 * 512, blocks)]
        for k in smalls: ins(k)
        files[ino] = (smalls, groups); used += blocks; written += blocks
        return groups
    def delete():
        nonlocal used, small
        k = rnd.choice(list(files.keys())); smalls, groups = files.pop(k)
        for g in groups: claimed[g] = False
        for key in smalls:
            s = where.pop(key); table[s] = 0; small -= 1
        used -= len(smalls) + 512 * len(groups)
    age(rnd, SLOTS, create, delete, lambda: (used, written), to, churn)
    n = len(perm)
    def probe(key, target):
        """Slots read by a lookup of key (found at target, or absent: None)."""
        p = 0; b = jump_seq(key, n)[-1]
        for i in range(n):
            g = perm[(b + i) % n]; s = slot_in(g, key)
            for _ in range(512):
                p += 1
                if s == target: return p
                if table[s] == 0: return p
                s = g * 512 + (s + 1) % 512
        return p
    hits = sorted(probe(k, s) for k, s in where.items())
    misses = sorted(probe((1 << 62) | i, None) for i in range(20000))
    free_whole = sum(1 for g in range(G) if not claimed[g] and not opened[g])
    gs = create(final * 512) or []
    return {"target_load": target, "open_groups": n, "small_load": round(small / (n * 512), 3),
            "hit_probe_mean": round(sum(hits) / len(hits), 2), "hit_probe_p99": hits[int(.99 * (len(hits) - 1))],
            "miss_probe_mean": round(sum(misses) / len(misses), 1), "moves_aging": st["moves"], "opens": st["opens"], "spilled_ever": st["spilled"],
            "free_whole_groups_aged": free_whole, "claims_failed_aging": st["claims_failed"],
            "final_file_groups": f"{len(gs)} of {final}", "written_blocks": written}
def run_paper(seed=7, to=0.75, churn=1.0):
    """The paper's placement under the same aging: every block hashed over the whole table."""
    rnd = random.Random(seed)
    table = [0] * SLOTS; where = {}
    def ins(key):
        s = h(key) % SLOTS
        while table[s] != 0: s = (s + 1) % SLOTS
        table[s] = key; where[key] = s
    files = {}; used = 0; ino = 0; written = 0
    def create(blocks):
        nonlocal ino, used, written
        if used + blocks > SLOTS * 0.97: return
        ino += 1; keys = [(ino << 32) | l for l in range(blocks)]
        for k in keys: ins(k)
        files[ino] = keys; used += blocks; written += blocks
    def delete():
        nonlocal used
        keys = files.pop(rnd.choice(list(files.keys())))
        for k in keys:
            table[where.pop(k)] = 0
        used -= len(keys)
    age(rnd, SLOTS, create, delete, lambda: (used, written), to, churn)
    def probe(key, target):
        p, s = 0, h(key) % SLOTS
        while True:
            p += 1
            if s == target or table[s] == 0: return p
            s = (s + 1) % SLOTS
    hits = sorted(probe(k, s) for k, s in where.items())
    misses = sorted(probe((1 << 62) | i, None) for i in range(20000))
    free_whole = sum(1 for g in range(G) if all(table[s] == 0 for s in range(g * 512, g * 512 + 512)))
    return {"variant": "paper", "hit_probe_mean": round(sum(hits) / len(hits), 2), "hit_probe_p99": hits[int(.99 * (len(hits) - 1))],
            "miss_probe_mean": round(sum(misses) / len(misses), 1), "free_whole_groups_aged": free_whole, "written_blocks": written}
print(json.dumps(run_paper()), flush=True)
for t in (0.8, 0.9):
    print(json.dumps(dict(variant="jump regions", **run(t))), flush=True)
