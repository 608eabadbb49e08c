//! A reference model of the namespace and file contents, the operations the tests apply to
//! both it and the real file system, and snapshots of either for comparison.
#![allow(dead_code)]

use hashfs::pm::PmDevice;
use hashfs::{Error, FileSystem, FileType, OpenOptions};
use rand::{rngs::SmallRng, Rng};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What a test does to the file system.
#[derive(Clone, Debug)]
pub enum Op {
    Write { path: String, off: u64, len: usize, seed: u8 },
    Truncate { path: String, size: u64 },
    Mkdir { path: String },
    Unlink { path: String },
    Rmdir { path: String },
    Rename { from: String, to: String },
    Link { from: String, to: String },
    Symlink { path: String },
    Chmod { path: String, perm: u32 },
}

/// The outcome class the model predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    Invalid,
    NotPermitted,
    NoSpace,
    Other,
}

pub fn outcome<T>(r: &hashfs::Result<T>) -> Outcome {
    match r {
        Ok(_) => Outcome::Ok,
        Err(Error::NotFound) => Outcome::NotFound,
        Err(Error::Exists) => Outcome::Exists,
        Err(Error::NotDir) => Outcome::NotDir,
        Err(Error::IsDir) => Outcome::IsDir,
        Err(Error::NotEmpty) => Outcome::NotEmpty,
        Err(Error::Invalid(_)) => Outcome::Invalid,
        Err(Error::NotPermitted) => Outcome::NotPermitted,
        Err(Error::NoSpace) => Outcome::NoSpace,
        Err(e) => {
            eprintln!("unexpected error: {e:?}");
            Outcome::Other
        }
    }
}

pub fn data_for(seed: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| seed.wrapping_mul(31).wrapping_add(((off + i) % 253) as u8) | 1).collect()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    File { data: Vec<u8>, perm: u32 },
    Dir { perm: u32 },
    Symlink { target: Vec<u8> },
}

#[derive(Clone, Debug, Default)]
pub struct Model {
    /// Path -> node id (the root "/" is implicit).
    paths: BTreeMap<String, u64>,
    nodes: HashMap<u64, Node>,
    next: u64,
}

fn parent_of(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) => "/",
        Some(i) => &p[..i],
        None => "/",
    }
}

impl Model {
    /// A model whose tree already holds the directory `path` (a test's private root).
    pub fn with_dir(path: &str) -> Model {
        let mut m = Model::default();
        m.add(path, Node::Dir { perm: 0o755 });
        m
    }

    fn node(&self, p: &str) -> Option<&Node> {
        if p == "/" {
            return Some(&Node::Dir { perm: 0o755 });
        }
        self.paths.get(p).and_then(|id| self.nodes.get(id))
    }

    /// Every proper ancestor must be a directory.
    fn check_parents(&self, p: &str) -> Result<(), Outcome> {
        let mut ancestors = Vec::new();
        let mut cur = parent_of(p);
        while cur != "/" {
            ancestors.push(cur);
            cur = parent_of(cur);
        }
        for a in ancestors.into_iter().rev() {
            match self.node(a) {
                None => return Err(Outcome::NotFound),
                Some(Node::Symlink { .. }) => return Err(Outcome::NotFound), // targets dangle
                Some(Node::File { .. }) => return Err(Outcome::NotDir),
                Some(Node::Dir { .. }) => {}
            }
        }
        Ok(())
    }

    fn children(&self, dir: &str) -> impl Iterator<Item = &String> {
        let prefix = if dir == "/" { "/".to_string() } else { format!("{dir}/") };
        self.paths.keys().filter(move |k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
    }

    fn add(&mut self, p: &str, n: Node) {
        self.next += 1;
        self.nodes.insert(self.next, n);
        self.paths.insert(p.to_string(), self.next);
    }

    fn remove_path(&mut self, p: &str) {
        if let Some(id) = self.paths.remove(p) {
            if !self.paths.values().any(|&v| v == id) {
                self.nodes.remove(&id);
            }
        }
    }

    pub fn apply(&mut self, op: &Op) -> Outcome {
        match self.try_apply(op) {
            Ok(()) => Outcome::Ok,
            Err(o) => o,
        }
    }

    fn try_apply(&mut self, op: &Op) -> Result<(), Outcome> {
        match op {
            Op::Write { path, off, len, seed } => {
                self.check_parents(path)?;
                match self.node(path) {
                    Some(Node::Dir { .. }) => return Err(Outcome::IsDir),
                    Some(Node::Symlink { .. }) => return Err(Outcome::NotFound),
                    None => self.add(path, Node::File { data: Vec::new(), perm: 0o644 }),
                    Some(Node::File { .. }) => {}
                }
                let id = self.paths[path];
                if let Some(Node::File { data, .. }) = self.nodes.get_mut(&id) {
                    let end = *off as usize + len;
                    if data.len() < end {
                        data.resize(end, 0);
                    }
                    data[*off as usize..end].copy_from_slice(&data_for(*seed, *off, *len));
                }
                Ok(())
            }
            Op::Truncate { path, size } => {
                self.check_parents(path)?;
                match self.node(path) {
                    None | Some(Node::Symlink { .. }) => Err(Outcome::NotFound),
                    Some(Node::Dir { .. }) => Err(Outcome::IsDir),
                    Some(Node::File { .. }) => {
                        let id = self.paths[path];
                        if let Some(Node::File { data, .. }) = self.nodes.get_mut(&id) {
                            data.resize(*size as usize, 0);
                        }
                        Ok(())
                    }
                }
            }
            Op::Mkdir { path } => {
                self.check_parents(path)?;
                if self.node(path).is_some() {
                    return Err(Outcome::Exists);
                }
                self.add(path, Node::Dir { perm: 0o755 });
                Ok(())
            }
            Op::Symlink { path } => {
                self.check_parents(path)?;
                if self.node(path).is_some() {
                    return Err(Outcome::Exists);
                }
                let target = format!("/nowhere{path}").into_bytes();
                self.add(path, Node::Symlink { target });
                Ok(())
            }
            Op::Unlink { path } => {
                self.check_parents(path)?;
                match self.node(path) {
                    None => Err(Outcome::NotFound),
                    Some(Node::Dir { .. }) => Err(Outcome::IsDir),
                    Some(_) => {
                        self.remove_path(path);
                        Ok(())
                    }
                }
            }
            Op::Rmdir { path } => {
                self.check_parents(path)?;
                match self.node(path) {
                    None => Err(Outcome::NotFound),
                    Some(Node::Dir { .. }) => {
                        if self.children(path).next().is_some() {
                            return Err(Outcome::NotEmpty);
                        }
                        self.remove_path(path);
                        Ok(())
                    }
                    Some(_) => Err(Outcome::NotDir),
                }
            }
            Op::Chmod { path, perm } => {
                self.check_parents(path)?;
                match self.node(path) {
                    None | Some(Node::Symlink { .. }) => Err(Outcome::NotFound),
                    Some(_) => {
                        let id = self.paths[path];
                        match self.nodes.get_mut(&id) {
                            Some(Node::File { perm: p, .. }) | Some(Node::Dir { perm: p }) => *p = *perm,
                            _ => {}
                        }
                        Ok(())
                    }
                }
            }
            Op::Link { from, to } => {
                self.check_parents(from)?;
                let src = self.node(from).cloned().ok_or(Outcome::NotFound)?;
                self.check_parents(to)?;
                if self.node(to).is_some() {
                    return Err(Outcome::Exists);
                }
                if matches!(src, Node::Dir { .. }) {
                    return Err(Outcome::NotPermitted);
                }
                let id = self.paths[from];
                self.paths.insert(to.clone(), id);
                Ok(())
            }
            Op::Rename { from, to } => {
                self.check_parents(from)?;
                self.check_parents(to)?;
                let src = self.node(from).cloned().ok_or(Outcome::NotFound)?;
                if from == to {
                    return Ok(());
                }
                let src_dir = matches!(src, Node::Dir { .. });
                if let Some(dst) = self.node(to) {
                    if self.paths.get(from) == self.paths.get(to) {
                        return Ok(());
                    }
                    let dst_dir = matches!(dst, Node::Dir { .. });
                    if src_dir && to.starts_with(&format!("{from}/")) {
                        return Err(Outcome::Invalid);
                    }
                    if src_dir && !dst_dir {
                        return Err(Outcome::NotDir);
                    }
                    if !src_dir && dst_dir {
                        return Err(Outcome::IsDir);
                    }
                    if dst_dir && self.children(to).next().is_some() {
                        return Err(Outcome::NotEmpty);
                    }
                    self.remove_path(to);
                } else if src_dir && to.starts_with(&format!("{from}/")) {
                    return Err(Outcome::Invalid);
                }
                let prefix = format!("{from}/");
                let moved: Vec<(String, u64)> = self
                    .paths
                    .iter()
                    .filter(|(k, _)| *k == from || k.starts_with(&prefix))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                for (k, _) in &moved {
                    self.paths.remove(k);
                }
                for (k, v) in moved {
                    let nk = format!("{to}{}", &k[from.len()..]);
                    self.paths.insert(nk, v);
                }
                Ok(())
            }
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut groups: HashMap<u64, Vec<String>> = HashMap::new();
        for (p, id) in &self.paths {
            groups.entry(*id).or_default().push(p.clone());
        }
        let mut out = Snapshot::new();
        for (p, id) in &self.paths {
            let e = match &self.nodes[id] {
                Node::File { data, perm } => SnapEntry::File {
                    data: data.clone(),
                    perm: *perm,
                    links: groups[id].iter().filter(|q| *q != p).cloned().collect(),
                },
                Node::Dir { perm } => SnapEntry::Dir { perm: *perm },
                Node::Symlink { target } => SnapEntry::Symlink { target: target.clone() },
            };
            out.insert(p.clone(), e);
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapEntry {
    File { data: Vec<u8>, perm: u32, links: Vec<String> },
    Dir { perm: u32 },
    Symlink { target: Vec<u8> },
}

pub type Snapshot = BTreeMap<String, SnapEntry>;

/// Walks the real file system into a snapshot (the root itself not included), through the
/// crash explorer's observable state.
pub fn snapshot<D: PmDevice>(fs: &FileSystem<D>) -> hashfs::Result<Snapshot> {
    let seen = hashfs::testing::crashtest::snapshot::Snapshot::of(fs)?.0;
    let mut by_ino: HashMap<u32, Vec<String>> = HashMap::new();
    for (path, e) in &seen {
        by_ino.entry(e.ino).or_default().push(path.clone());
    }
    let mut out = Snapshot::new();
    for (path, e) in seen.into_iter().filter(|(p, _)| p != "/") {
        let entry = match e.file_type {
            FileType::Directory => SnapEntry::Dir { perm: e.perm },
            FileType::Symlink => SnapEntry::Symlink { target: e.content.to_vec(e.size) },
            FileType::Regular => {
                let mut links: Vec<String> = by_ino[&e.ino].iter().filter(|q| **q != path).cloned().collect();
                links.sort();
                SnapEntry::File { data: e.content.to_vec(e.size), perm: e.perm, links }
            }
            t => panic!("{path}: the model makes no {t:?}"),
        };
        out.insert(path, entry);
    }
    Ok(out)
}

/// Applies an operation to the real file system.
pub fn apply_fs<D: PmDevice>(fs: &FileSystem<D>, op: &Op) -> Outcome {
    let p = |s: &String| Path::new(s.as_str()).to_path_buf();
    match op {
        Op::Write { path, off, len, seed } => outcome(&(|| {
            let f = fs.open_file(&p(path), OpenOptions::new().write(true).create(true))?;
            let data = data_for(*seed, *off, *len);
            // A quarter of the writes are untorn (the same result, by the other path).
            if seed % 4 == 0 && *len as u64 <= fs.untorn_write_max() {
                return f.write_atomic_at(*off, &data).map(drop);
            }
            let mut done = 0;
            while done < data.len() {
                done += f.write_at(off + done as u64, &data[done..])?;
            }
            Ok(())
        })()),
        Op::Truncate { path, size } => outcome(&(|| {
            let f = fs.open_file(&p(path), OpenOptions::new().write(true))?;
            f.set_len(*size)
        })()),
        Op::Mkdir { path } => outcome(&fs.create_dir(&p(path), 0o755)),
        Op::Unlink { path } => outcome(&fs.remove_file(&p(path))),
        Op::Rmdir { path } => outcome(&fs.remove_dir(&p(path))),
        Op::Rename { from, to } => outcome(&fs.rename(&p(from), &p(to))),
        Op::Link { from, to } => outcome(&fs.hard_link(&p(from), &p(to))),
        Op::Symlink { path } => outcome(&fs.symlink(Path::new(&format!("/nowhere{path}")), &p(path))),
        Op::Chmod { path, perm } => outcome(&fs.set_permissions(&p(path), *perm)),
    }
}

/// A random operation over a small universe of paths below `root` (so that operations
/// collide often and exercise the error cases).
pub fn random_op(rng: &mut SmallRng, root: &str, max_io: usize) -> Op {
    const DIRS: [&str; 4] = ["", "/d1", "/d1/d2", "/d3"];
    const NAMES: [&str; 4] = ["a", "b", "d1", "d2"];
    let path = |rng: &mut SmallRng| {
        let d = DIRS[rng.random_range(0..DIRS.len())];
        let n = NAMES[rng.random_range(0..NAMES.len())];
        let dir = format!("{root}{d}");
        if rng.random_bool(0.25) {
            // Directory paths themselves, so mkdir/rmdir/rename of directories happen.
            if d.is_empty() {
                format!("{root}/d1")
            } else {
                dir
            }
        } else {
            format!("{dir}/{n}")
        }
    };
    match rng.random_range(0..100) {
        0..=29 => {
            let off = if rng.random_bool(0.5) { 0 } else { rng.random_range(0..3 * 4096) };
            Op::Write { path: path(rng), off, len: rng.random_range(1..=max_io), seed: rng.random() }
        }
        30..=37 => Op::Truncate { path: path(rng), size: rng.random_range(0..4 * 4096) },
        38..=51 => Op::Mkdir { path: path(rng) },
        52..=61 => Op::Unlink { path: path(rng) },
        62..=69 => Op::Rmdir { path: path(rng) },
        70..=84 => Op::Rename { from: path(rng), to: path(rng) },
        85..=90 => Op::Link { from: path(rng), to: path(rng) },
        91..=95 => Op::Symlink { path: path(rng) },
        _ => Op::Chmod { path: path(rng), perm: rng.random_range(0..0o777) },
    }
}
