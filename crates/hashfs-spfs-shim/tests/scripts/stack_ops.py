"""What tests/stack.rs runs under libhashfs_spfs_shim.so: one subcommand per scenario,
over files in the lower directory given as argv[2]. Prints what the test checks."""
import mmap, os, sys, time


def rec(i):
    return (b"record %06d " % i) * 8 + b"\n"


def msg(n):
    return (b"message %05d\n" % n) * (300 + n % 400)


def all_recs(n):
    return b"".join(rec(i) for i in range(n))


def append_synced(path, n, start=0, flags=os.O_CREAT | os.O_WRONLY | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    for i in range(start, start + n):
        os.write(fd, rec(i))
        os.fdatasync(fd)
    return fd


def main():
    cmd, lower = sys.argv[1], sys.argv[2]
    wal = os.path.join(lower, "wal")
    if cmd == "promote":
        # 100 records, each fdatasync'ed: promoted after the first 31.
        fd = append_synced(wal, 100)
        print("fstat", os.fstat(fd).st_size)
        os.close(fd)
        print("stat", os.stat(wal).st_size)
        with open(wal, "rb") as f:
            print("read-ok", f.read() == all_recs(100))
        fd = os.open(wal, os.O_RDONLY)
        print("pread-ok", os.pread(fd, 5000, 3000) == all_recs(100)[3000:8000])
        os.lseek(fd, -10, os.SEEK_END)
        print("tail-ok", os.read(fd, 100) == all_recs(100)[-10:])
        os.close(fd)
    elif cmd == "read":
        with open(wal, "rb") as f:
            data = f.read()
        print("size", os.stat(wal).st_size, len(data))
        n = 0
        while data[n * len(rec(0)):(n + 1) * len(rec(0))] == rec(n):
            n += 1
        print("records", n, "exact", data == all_recs(n))
    elif cmd == "writer":
        # Appends and fdatasyncs records forever, saying each one after its fdatasync.
        fd = os.open(wal, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        i = int(sys.argv[3])
        while True:
            os.write(fd, rec(i))
            os.fdatasync(fd)
            print(i, flush=True)
            i += 1
    elif cmd == "truncate":
        os.close(append_synced(wal, 40))
        fd = os.open(wal, os.O_WRONLY | os.O_TRUNC)
        print("after-otrunc", os.fstat(fd).st_size)
        os.write(fd, b"abcdef")
        os.fsync(fd)
        os.close(fd)
        os.truncate(wal, 4)
        with open(wal, "rb") as f:
            print("content", f.read().decode())
        fd = os.open(wal, os.O_RDWR)
        os.ftruncate(fd, 2)
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"Z")
        os.close(fd)
        with open(wal, "rb") as f:
            print("final", f.read().decode())
    elif cmd == "mmap":
        fd = append_synced(wal, 40)
        with mmap.mmap(os.open(wal, os.O_RDONLY), 0, access=mmap.ACCESS_READ) as m:
            print("mapped-ok", m[:] == all_recs(40))
        for i in range(40, 80):
            os.write(fd, rec(i))
            os.fdatasync(fd)
        os.close(fd)
        with open(wal, "rb") as f:
            print("read-ok", f.read() == all_recs(80))
    elif cmd == "reuse":
        # A promoted file deleted, and new files made until one gets its inode number back.
        fd = append_synced(wal, 40)
        ino = os.fstat(fd).st_ino
        os.close(fd)
        os.unlink(wal)
        for k in range(64):
            p = os.path.join(lower, "new%d" % k)
            fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
            if os.fstat(fd).st_ino == ino:
                # Kept open from its creation, as a database keeps its log.
                for i in range(40):
                    os.write(fd, rec(i))
                    os.fdatasync(fd)
                os.close(fd)
                print("reused", k)
                break
            os.close(fd)
        else:
            print("not-reused")
    elif cmd == "hold":
        # Takes the image and waits for a line on stdin; a forked child tries the lower directory.
        fd = append_synced(wal, 5)
        pid = os.fork()
        if pid == 0:
            try:
                os.open(os.path.join(lower, "x"), os.O_CREAT | os.O_WRONLY, 0o644)
                os._exit(0)
            except OSError as e:
                os._exit(e.errno)
        _, status = os.waitpid(pid, 0)
        print("child-errno", os.waitstatus_to_exitcode(status), flush=True)
        sys.stdin.readline()
        os.close(fd)
    elif cmd == "maildir":
        # varmail's flow in two directories: in "mail" 40 messages made, synced twice and
        # read; one made in "other"; then a message in each, printing what the lower files
        # hold after their fsync.
        for d in ("mail", "other"):
            os.makedirs(os.path.join(lower, d), exist_ok=True)
        for i in range(40):
            p = os.path.join(lower, "mail", "m%d" % i)
            fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
            os.write(fd, rec(i))
            os.fdatasync(fd)
            os.write(fd, rec(i))
            os.fdatasync(fd)
            os.close(fd)
        for d in ("mail", "other"):
            p = os.path.join(lower, d, "late")
            fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
            os.write(fd, rec(7))
            os.fdatasync(fd)
            os.close(fd)
            with open(p, "rb") as f:
                print(d, "merged-ok", f.read() == rec(7))
    elif cmd == "powercut":
        # Until killed: messages delivered into "box" (made, written, fdatasync'd), appends
        # to 100 messages delivered there first, and a log, each acknowledged on stdout
        # once its fdatasync returned ("D n", "A i k", "L k").
        box = os.path.join(lower, "box")
        os.makedirs(box, exist_ok=True)
        for i in range(100):
            fd = os.open(os.path.join(box, "old%03d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.write(fd, msg(i))
            os.close(fd)
        time.sleep(0.15)
        appended = [0] * 100
        for k in range(10 ** 9):
            fd = os.open(os.path.join(box, "new%05d" % k), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.write(fd, msg(1000 + k))
            os.fdatasync(fd)
            os.close(fd)
            print("D", k, flush=True)
            i = k * 37 % 100
            fd = os.open(os.path.join(box, "old%03d" % i), os.O_WRONLY | os.O_APPEND)
            os.write(fd, b"[record %d of %d]\n" % (appended[i], i))
            os.fdatasync(fd)
            os.close(fd)
            print("A", i, appended[i], flush=True)
            appended[i] += 1
            fd = os.open(os.path.join(lower, "log"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
            os.write(fd, (b"log record %06d\n" % k) * 20)
            os.fdatasync(fd)
            os.close(fd)
            print("L", k, flush=True)
    elif cmd == "settled":
        # Two messages delivered (not synced) before "mail" turns hot, three messages made
        # and synced there (with promote_after=3 the third makes it hot), then an append and
        # fdatasync of the first message (no syncfs yet: it goes below and asks for one), a
        # wait for the write-back thread's syncfs, and the same of the second.
        mail = os.path.join(lower, "mail")
        os.makedirs(mail, exist_ok=True)
        for name in ("early", "old"):
            with open(os.path.join(mail, name), "wb") as f:
                f.write(rec(1))
        time.sleep(0.1)
        for i in range(3):
            fd = os.open(os.path.join(mail, "m%d" % i), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
            os.write(fd, rec(i))
            os.fdatasync(fd)
            os.close(fd)
        for name in ("early", "old"):
            with open(os.path.join(mail, name), "ab") as f:
                f.write(rec(2))
                f.flush()
                os.fdatasync(f.fileno())
            time.sleep(0.3)
        with open(os.path.join(mail, "old"), "rb") as f:
            print("old merged-ok", f.read() == rec(1) + rec(2))
    elif cmd == "standalone":
        # SPFS's standalone rules (issue 58): with HASHFS_STACK_OPTIONS=extension=log, files
        # made as a WAL ("000001.log"), with O_SYNC, with O_DSYNC or in a directory marked
        # user.hashfs.boost start in PM; "x.logger", "plain" and "unmarked/m" (made after the
        # mark was removed) do not. Each gets one record and one fdatasync.
        boosted, unmarked = os.path.join(lower, "boosted"), os.path.join(lower, "unmarked")
        os.makedirs(boosted, exist_ok=True)
        os.makedirs(unmarked, exist_ok=True)
        os.setxattr(boosted, "user.hashfs.boost", b"")
        os.setxattr(unmarked, "user.hashfs.boost", b"")
        os.removexattr(unmarked, "user.hashfs.boost")
        made = [("000001.log", 0), ("x.logger", 0), ("plain", 0), ("sync", os.O_SYNC),
                ("dsync", os.O_DSYNC), ("boosted/m", 0), ("unmarked/m", 0)]
        for i, (name, extra) in enumerate(made):
            fd = os.open(os.path.join(lower, name), os.O_CREAT | os.O_WRONLY | os.O_EXCL | extra, 0o644)
            os.write(fd, rec(i))
            os.fdatasync(fd)
            os.close(fd)
            with open(os.path.join(lower, name), "rb") as f:
                print(name, "merged-ok", f.read() == rec(i))
    elif cmd == "made":
        # Files made in PM (HASHFS_STACK_OPTIONS=extension=log), kept there at exit: a.log,
        # and b.log unlinked while open.
        for name, i in (("a.log", 1), ("c.log", 3), ("b.log", 2)):
            fd = os.open(os.path.join(lower, name), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o640)
            os.write(fd, rec(i))
            os.fdatasync(fd)
            if name != "b.log":
                os.close(fd)
            else:
                os.unlink(os.path.join(lower, name))
                print("unlinked-open", os.fstat(fd).st_nlink)
    elif cmd == "made-list":
        # The first call under the lower directory: a listing.
        print("listed", sorted(os.listdir(lower)))
    elif cmd == "made-read":
        # First (the stack not open yet): c.log, lost below, opened to be cut and rewritten.
        fd = os.open(os.path.join(lower, "c.log"), os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"new")
        os.close(fd)
        print("c.log trunc-ok", open(os.path.join(lower, "c.log"), "rb").read() == b"new")
        for name in ("a.log", "b.log"):
            p = os.path.join(lower, name)
            print(name, "exists", os.path.exists(p), "ok", os.path.exists(p) and open(p, "rb").read() == rec(1))
    elif cmd == "reads":
        # Two files made alike (40 appends, each fdatasync'ed: promoted at the 31st), one
        # of them also read 20 times after each of its first ten syncs, while below.
        for name, reads in (("quiet", 0), ("read", 20)):
            p = os.path.join(lower, name)
            fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
            for i in range(40):
                os.write(fd, rec(i))
                os.fdatasync(fd)
                if i < 10:
                    for _ in range(reads):
                        os.pread(fd, 100, 0)
            os.close(fd)
    elif cmd == "touch":
        # Uses the stack (a file made under the lower directory) and nothing else.
        os.close(os.open(os.path.join(lower, "touched"), os.O_CREAT | os.O_WRONLY, 0o644))
    elif cmd == "open":
        for p in (wal, "/proc/self/status"):
            try:
                os.close(os.open(p, os.O_RDONLY))
                print("opened", p)
            except OSError as e:
                print("errno", e.errno, p)
    else:
        sys.exit("unknown command " + cmd)


main()
