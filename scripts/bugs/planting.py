"""How scripts/plant-bugs.py plants the deliberate bugs: the registry (`bug`), the kinds of
change (`lines`, `plant`, `sub`), the switch each planted bug hides behind, and the copy of
the tree they are planted in (`sync`). The bugs are in the modules beside this one."""
import os
import sys

BUGS = {}
files = {}
root = "."
current = None


def bug(name, rebuilt=False):
    def register(f):
        BUGS[name] = (f, rebuilt)
        return f
    return register


def text(path):
    if path not in files:
        files[path] = open(f"{root}/{path}").read()
    return files[path]


def sub(path, old, new):
    s = text(path)
    if s.count(old) != 1:
        sys.exit(f"bug {current}: the code it changes is not found once in {path}; update its module in scripts/bugs/")
    files[path] = s.replace(old, new)


def switch(path):
    # The hashfs crate's own code names the module by `crate`, the others by `hashfs`.
    krate = "crate" if path.startswith("crates/hashfs/") else "hashfs"
    return f'{krate}::planted::on("{current}")'


switched = set()


def plant(path, old, new):
    if "@ON" in new:
        switched.add(current)
    sub(path, old, new.replace("@ON", switch(path)))


def lines(path, old, new):
    o, n = old.splitlines(keepends=True), new.splitlines(keepends=True)
    p = 0
    while p < min(len(o), len(n)) and o[p] == n[p]:
        p += 1
    s = 0
    while s < min(len(o), len(n)) - p and o[len(o) - 1 - s] == n[len(n) - 1 - s]:
        s += 1
    om, nm = o[p:len(o) - s], n[p:len(n) - s]
    first = (om or nm)[0]
    ind = first[:len(first) - len(first.lstrip())]

    def block(ls):
        return "".join("    " + line if line.strip() else line for line in ls)

    if not nm:
        mid = f"{ind}if !@ON {{\n{block(om)}{ind}}}\n"
    elif not om:
        mid = f"{ind}if @ON {{\n{block(nm)}{ind}}}\n"
    else:
        mid = f"{ind}if @ON {{\n{block(nm)}{ind}}} else {{\n{block(om)}{ind}}}\n"
    plant(path, old, "".join(o[:p]) + mid + "".join(o[len(o) - s:]))


MODULE = '''//! The deliberate bugs scripts/plant-bugs.py planted in this copy of the tree (never in
//! the tree itself), each switched on by its name in HASHFS_PLANTED_BUG.

/// Whether the deliberate bug `name` is the one chosen for this run.
pub fn on(name: &str) -> bool {
    static CHOSEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| std::env::var("HASHFS_PLANTED_BUG").ok()).as_deref() == Some(name)
}
'''


def plant_all():
    global current
    for name, (f, rebuilt) in BUGS.items():
        if not rebuilt:
            current = name
            f()
            if name not in switched:
                sys.exit(f"bug {name}: none of its changes has the switch (@ON)")
    current = None
    files["crates/hashfs/src/planted.rs"] = MODULE
    sub("crates/hashfs/src/lib.rs", "\npub mod pm;\n", "\npub mod planted;\npub mod pm;\n")


def apply(name):
    global current
    current = name
    BUGS[name][0]()


def sync(tree, copy):
    """Makes `copy` hold the files of `tree` (less its .git and target), with the changes
    in `files`; a file whose bytes are already there is left alone."""
    want = set()

    def put(path, data, executable=False):
        want.add(path)
        dst = os.path.join(copy, path)
        try:
            if open(dst, "rb").read() == data:
                return
        except FileNotFoundError:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
        if executable:
            os.chmod(dst, 0o755)

    for d, dirs, names in os.walk(tree):
        if os.path.relpath(d, tree) == ".":
            dirs[:] = [x for x in dirs if x not in (".git", "target")]
        for n in names:
            src = os.path.join(d, n)
            if os.path.islink(src):
                continue  # (the tree has none; a link would be left out)
            path = os.path.normpath(os.path.relpath(src, tree))
            data = files[path].encode() if path in files else open(src, "rb").read()
            put(path, data, os.access(src, os.X_OK))
    for path in set(files) - want:  # the planted module, which the tree does not have
        put(path, files[path].encode())
    for d, _, names in os.walk(copy):
        for n in names:
            path = os.path.normpath(os.path.relpath(os.path.join(d, n), copy))
            if path not in want:
                os.remove(os.path.join(d, n))


def main():
    global root, files
    mode = sys.argv[1]
    if mode == "rebuilt":
        print("\n".join(n for n, (_, r) in BUGS.items() if r))
    elif mode == "sync":
        root, copy = sys.argv[2], sys.argv[3]
        plant_all()
        if len(sys.argv) > 4:
            name = sys.argv[4]
            if name not in BUGS or not BUGS[name][1]:
                sys.exit(f"plant-bugs: {name} is not a rebuilt bug")
            apply(name)
        sync(root, copy)
    elif mode == "check":
        root, names = sys.argv[2], sys.argv[3:]
        if sorted(names) != sorted(BUGS):
            sys.exit(f"plant-bugs: crash-bugs.sh lists {sorted(set(names) - set(BUGS))} and this file "
                     f"{sorted(set(BUGS) - set(names))} apart from the others")
        plant_all()
        planted = dict(files)
        for name, (_, rebuilt) in BUGS.items():
            if rebuilt:
                files = dict(planted)
                apply(name)
    else:
        sys.exit(f"plant-bugs: unknown mode {mode}")
