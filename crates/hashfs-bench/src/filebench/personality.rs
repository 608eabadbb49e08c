//! Filebench's four personalities that issue 20 names, with filebench's defaults
//! (`workloads/fileserver.f`, `varmail.f`, `webserver.f`, `createfiles.f`): the same
//! filesets and the same flow of operations per thread.

use super::fileset::Spec;

/// One step of a thread's flow (filebench's flowops). `usize` fields name a fileset.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// Create a file that does not exist yet and keep it open.
    Create(usize),
    /// Write the open file's whole size, `iosize` at a time.
    WriteWhole {
        iosize: usize,
    },
    /// Open an existing file for reading and writing.
    Open(usize),
    /// Read the open file from start to end, `iosize` at a time.
    ReadWhole {
        iosize: usize,
    },
    /// Append between 1 and `iosize` bytes (uniform) at the open file's end.
    AppendRand {
        iosize: usize,
    },
    /// Append between 1 and `iosize` bytes to the fileset's one file, opened once per
    /// thread with O_APPEND (the web server's shared log).
    AppendShared {
        set: usize,
        iosize: usize,
    },
    Fsync,
    Close,
    /// Delete an existing file.
    Delete(usize),
    /// stat an existing file.
    Stat(usize),
}

pub struct Personality {
    pub name: &'static str,
    pub threads: usize,
    pub sets: Vec<Spec>,
    /// The flow, each step with filebench's flowop name.
    pub flow: Vec<(&'static str, Op)>,
    /// Whether the run ends when no file is left to create (createfiles).
    pub until_full: bool,
}

const MIB: usize = 1 << 20;
const APPEND: usize = 16 << 10;

pub const NAMES: [&str; 4] = ["fileserver", "varmail", "webserver", "createfiles"];

pub fn by_name(name: &str) -> Option<Personality> {
    let set = |name, entries, dir_width, mean_size, prealloc, readonly| Spec {
        name,
        entries,
        dir_width,
        mean_size,
        prealloc,
        readonly,
    };
    Some(match name {
        "fileserver" => Personality {
            name: "fileserver",
            threads: 50,
            sets: vec![set("bigfileset", 10_000, 20, 128 << 10, 80, false)],
            flow: vec![
                ("createfile1", Op::Create(0)),
                ("wrtfile1", Op::WriteWhole { iosize: MIB }),
                ("closefile1", Op::Close),
                ("openfile1", Op::Open(0)),
                ("appendfilerand1", Op::AppendRand { iosize: APPEND }),
                ("closefile2", Op::Close),
                ("openfile2", Op::Open(0)),
                ("readfile1", Op::ReadWhole { iosize: MIB }),
                ("closefile3", Op::Close),
                ("deletefile1", Op::Delete(0)),
                ("statfile1", Op::Stat(0)),
            ],
            until_full: false,
        },
        "varmail" => Personality {
            name: "varmail",
            threads: 16,
            sets: vec![set("bigfileset", 1_000, 1_000_000, 16 << 10, 80, false)],
            flow: vec![
                ("deletefile1", Op::Delete(0)),
                ("createfile2", Op::Create(0)),
                ("appendfilerand2", Op::AppendRand { iosize: APPEND }),
                ("fsyncfile2", Op::Fsync),
                ("closefile2", Op::Close),
                ("openfile3", Op::Open(0)),
                ("readfile3", Op::ReadWhole { iosize: MIB }),
                ("appendfilerand3", Op::AppendRand { iosize: APPEND }),
                ("fsyncfile3", Op::Fsync),
                ("closefile3", Op::Close),
                ("openfile4", Op::Open(0)),
                ("readfile4", Op::ReadWhole { iosize: MIB }),
                ("closefile4", Op::Close),
            ],
            until_full: false,
        },
        "webserver" => {
            const READS: [[&str; 3]; 10] = [
                ["openfile1", "readfile1", "closefile1"],
                ["openfile2", "readfile2", "closefile2"],
                ["openfile3", "readfile3", "closefile3"],
                ["openfile4", "readfile4", "closefile4"],
                ["openfile5", "readfile5", "closefile5"],
                ["openfile6", "readfile6", "closefile6"],
                ["openfile7", "readfile7", "closefile7"],
                ["openfile8", "readfile8", "closefile8"],
                ["openfile9", "readfile9", "closefile9"],
                ["openfile10", "readfile10", "closefile10"],
            ];
            let mut flow = Vec::new();
            for [open, read, close] in READS {
                flow.extend([(open, Op::Open(0)), (read, Op::ReadWhole { iosize: MIB }), (close, Op::Close)]);
            }
            flow.push(("appendlog", Op::AppendShared { set: 1, iosize: APPEND }));
            Personality {
                name: "webserver",
                threads: 100,
                sets: vec![
                    set("bigfileset", 1_000, 20, 16 << 10, 100, true),
                    set("logfiles", 1, 20, 16 << 10, 100, false),
                ],
                flow,
                until_full: false,
            }
        }
        "createfiles" => Personality {
            name: "createfiles",
            threads: 16,
            sets: vec![set("bigfileset", 50_000, 100, 16 << 10, 0, false)],
            flow: vec![
                ("createfile1", Op::Create(0)),
                ("writefile1", Op::WriteWhole { iosize: MIB }),
                ("closefile1", Op::Close),
            ],
            until_full: true,
        },
        _ => return None,
    })
}
