"""Design study for issue 15, item 2 (not the file system): HashFS's grouped placement under
Geriatrix-style aging (Agrawal sizes, to 75%, one capacity of churn) on a table of 2^18 slots,
then one file of 1/8 of the image: groups claimed, blocks moved, and small files' probe
lengths, with probe sequences that walk through claimed groups (as built) or skip them (one
directory read per skipped group), and the redirect design of docs/mappings.md: a group once
claimed is redirected for good, a small key's home is the first of up to 8 hashes that falls
outside a redirected group, lookups try its homes in order (a key inserted before a redirect
stays where it is), claims prefer redirected free groups and move the keys inside a group to
their new homes. Deletes free slots outright (no tombstones). One JSON line per variant:
python3 bench/winefs/hashfs_grouped_aging_sim.py"""
import json
import random
SLOTS = 1 << 18; G = SLOTS // 512
from aging_sim import MASK, age, h

class Files:
    """The aged image's files (every variant): a new file's whole 2 MiB chunks each take
    claim(chunk key)'s group, or their blocks go to ins(key) with the file's tail; a
    deleted file (chosen at random) frees its groups and its blocks in the variant's
    table, per-group counts, claimed flags and key-to-slot map."""

    def __init__(self, rnd, claim, ins, table, count, claimed, where):
        self.rnd, self.claim, self.ins = rnd, claim, ins
        self.table, self.count, self.claimed, self.where = table, count, claimed, where
        self.files, self.used, self.ino, self.written = {}, 0, 0, 0

    def create(self, blocks):
        if self.used + blocks > SLOTS * 0.97: return None
        self.ino += 1; ino = self.ino; groups = []
        for c in range(blocks // 512):
            g = self.claim((ino << 32) | c)
            if g is None:
                for l in range(c * 512, c * 512 + 512): self.ins((ino << 32) | l)
            else: groups.append(g)
        for l in range(blocks // 512 * 512, blocks):
            self.ins((ino << 32) | l)
        self.files[ino] = (blocks, groups); self.used += blocks; self.written += blocks
        return groups

    def delete(self):
        ino = self.rnd.choice(list(self.files.keys())); blocks, groups = self.files.pop(ino)
        for g in groups:
            self.claimed[g] = False; self.count[g] = 0
            for s in range(g * 512, g * 512 + 512): self.table[s] = 0
        for l in range(blocks):
            s = self.where.pop((ino << 32) | l, None)
            if s is not None: self.table[s] = 0; self.count[s // 512] -= 1
        self.used -= blocks


def run(skip, seed=7, to=0.75, churn=1.0, max_moves=256):
    rnd = random.Random(seed)
    table = [0] * SLOTS; count = [0] * G; claimed = [False] * G
    where = {}  # small key -> slot
    st = {"moves": 0, "claims": 0, "claims_failed": 0}
    def ins(key, avoid=-1):
        s = h(key) % SLOTS
        while True:
            g = s // 512
            if (skip and claimed[g]) or g == avoid:
                s = ((g + 1) * 512) % SLOTS; continue
            if table[s] == 0: break
            s = (s + 1) % SLOTS
        table[s] = key; count[s // 512] += 1; where[key] = s
        return s
    def claim(ck):
        c0 = h(ck) % G
        cands = [(c0 + i) % G for i in range(32)]
        cands = [g for g in cands if not claimed[g]]
        free = [g for g in cands if count[g] == 0]
        if free:
            g = free[0]
        else:
            cands.sort(key=lambda g: count[g])
            if not cands or count[cands[0]] > max_moves:
                st["claims_failed"] += 1; return None
            g = cands[0]
            for s in range(g * 512, g * 512 + 512):
                k = table[s]
                if k:
                    table[s] = 0; count[g] -= 1; ins(k, avoid=g); st["moves"] += 1
        claimed[g] = True; count[g] = 512; st["claims"] += 1
        for s in range(g * 512, g * 512 + 512): table[s] = -1
        return g
    files = Files(rnd, claim, ins, table, count, claimed, where)
    create = files.create
    age(rnd, SLOTS, create, files.delete, lambda: (files.used, files.written), to, churn)
    # probe lengths of small keys (slots read; a skipped group costs one directory read)
    pl = []
    for key, s in where.items():
        p, x = 1, h(key) % SLOTS
        while x != s:
            g = x // 512
            if skip and claimed[g]:
                p += 1; x = ((g + 1) * 512) % SLOTS; continue
            p += 1; x = (x + 1) % SLOTS
        pl.append(p)
    pl.sort()
    before = dict(st)
    gs = create(64 * 512) or []
    return {"skip": skip, "aged_probe_mean": round(sum(pl) / len(pl), 2), "aged_probe_p99": pl[int(.99 * (len(pl) - 1))],
            "aging_moves": before["moves"], "aging_claims": before["claims"], "aging_claims_failed": before["claims_failed"],
            "final_file_groups": f"{len(gs)} of 64", "final_file_moves": st["moves"] - before["moves"]}
NC = 8
def run_redirect(seed=7, to=0.75, churn=1.0, max_moves=256, final=64):
    redirect = True
    rnd = random.Random(seed)
    table = [0] * SLOTS; count = [0] * G; claimed = [False] * G; redir = [False] * G
    where = {}
    st = {"moves": 0, "claims": 0, "claims_failed": 0}
    def cands(key):
        out = []
        for c in range(NC):
            s = h(key ^ (c * 0x9E3779B97F4A7C15 & MASK)) % SLOTS
            out.append(s)
            if not (redirect and redir[s // 512]): break
        return out
    def walk(s):
        g = s // 512
        if claimed[g]:
            return ((g + 1) * 512) % SLOTS
        return s
    def nxt(s):
        s = (s + 1) % SLOTS
        if s % 512 == 0 and claimed[s // 512]:
            while claimed[s // 512]: s = ((s // 512 + 1) * 512) % SLOTS
        return s
    def ins(key):
        s = walk(cands(key)[-1])
        while table[s] != 0: s = nxt(s)
        table[s] = key; count[s // 512] += 1; where[key] = s
        return s
    def claim(ck):
        c0 = h(ck) % G
        cs = [(c0 + i) % G for i in range(32)]
        cs = [g for g in cs if not claimed[g]]
        free = [g for g in cs if count[g] == 0]
        free.sort(key=lambda g: not redir[g])
        if free:
            g = free[0]
        else:
            cs.sort(key=lambda g: (count[g], not redir[g]))
            if not cs or count[cs[0]] > max_moves:
                st["claims_failed"] += 1; return None
            g = cs[0]
            redir[g] = True
            claimed[g] = True  # paths skip it now; keys inside move out
            for s in range(g * 512, g * 512 + 512):
                k = table[s]
                if k:
                    table[s] = 0; count[g] -= 1; ins(k); st["moves"] += 1
        redir[g] = True
        claimed[g] = True; count[g] = 512; st["claims"] += 1
        for s in range(g * 512, g * 512 + 512): table[s] = -1
        return g
    files = Files(rnd, claim, ins, table, count, claimed, where)
    create = files.create
    age(rnd, SLOTS, create, files.delete, lambda: (files.used, files.written), to, churn)
    def pathlen(s0, target):
        p, x = 1, walk(s0)
        while x != target:
            if target is None and table[x] == 0: return p
            p += 1; x = nxt(x)
            if p > SLOTS: return p
        return p
    pl = []; own = []
    for key, s in where.items():
        cs = cands(key)
        tot = 0
        for c in cs:
            # is key on c's path?
            x = walk(c); p = 1; found = False
            while True:
                if x == s: found = True; break
                if table[x] == 0: break
                x = nxt(x); p += 1
            tot += p
            if found: own.append(p); break
        pl.append(tot)
    pl.sort(); own.sort()
    before = dict(st)
    free_groups = sum(1 for g in range(G) if count[g] == 0 and not claimed[g])
    nredir = sum(redir); nclaimed = sum(claimed)
    gs = create(final * 512) or []
    return {"variant": "redirect", "max_moves": max_moves, "lookup_probe_mean": round(sum(pl) / len(pl), 2), "lookup_probe_p99": pl[int(.99 * (len(pl) - 1))],
            "own_path_mean": round(sum(own)/len(own),2),
            "aging_moves": before["moves"], "aging_claims": before["claims"], "aging_claims_failed": before["claims_failed"],
            "free_groups_aged": free_groups, "redirected": nredir, "claimed_aged": nclaimed,
            "final_file_groups": f"{len(gs)} of {final}", "final_file_moves": st["moves"] - before["moves"]}
for skip in (False, True):
    print(json.dumps(run(skip)), flush=True)
for mm in (256, 512):
    print(json.dumps(run_redirect(max_moves=mm)), flush=True)
