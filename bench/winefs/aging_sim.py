"""What the placement simulations share (not the file system): Geriatrix's Agrawal file-size
profile, the hash, and the aging loop. Imported by hashfs_placement_sim.py,
hashfs_grouped_aging_sim.py and hashfs_jump_regions_sim.py."""
# (size in bytes, weight): the Agrawal profile's file sizes, as `hashfs-bench age` draws them.
AGRAWAL = [(8, 1), (32, 7), (128, 16), (512, 40), (2048, 50), (8192, 46), (32768, 35), (131072, 20), (524288, 10),
           (2097152, 4), (8388608, 1)]
MASK = (1 << 64) - 1


def h(x):
    x = (x ^ (x >> 33)) * 0xFF51AFD7ED558CCD & MASK
    x = (x ^ (x >> 33)) * 0xC4CEB3FE1A85EC53 & MASK
    return x ^ (x >> 33)


def age(rnd, slots, create, delete, counts, to=0.75, churn=1.0):
    """Geriatrix-style aging: files of Agrawal sizes (in blocks) created until `to` of the
    slots are used, then a random file deleted and the image refilled until `churn` times
    the slots more were written. `counts()` gives the caller's (used, written) blocks."""
    sizes, weights = zip(*AGRAWAL)
    draw = lambda: max(1, rnd.choices(sizes, weights)[0] // 4096)
    while counts()[0] < to * slots:
        create(draw())
    start = counts()[1]
    while counts()[1] - start < churn * slots:
        delete()
        while counts()[0] < to * slots:
            create(draw())
