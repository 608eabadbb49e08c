//! Extended attributes: Linux's semantics (namespaces, `XATTR_CREATE`/`XATTR_REPLACE`,
//! ENODATA, ERANGE, E2BIG), stored crash-consistently.
//!
//! Storage: a file's attributes live, all together, as one blob in the data of an *xattr
//! inode*: a regular inode with no name, mode 0, nlink 1 and `parent` = its owner, which
//! the owner names in `InodeRaw::xattr_ino`. A change writes the whole new blob into a
//! fresh xattr inode (nlink 0, so a crash before the switch leaves an orphan that recovery
//! frees), then one transaction points the owner at it, gives it nlink 1 and the old one
//! nlink 0; the old one is freed after the commit (or, after a crash, by recovery). The
//! owner's ctime changes in the same transaction. A reader sees the old set or the new,
//! never a mix.
//!
//! Blob: magic "XATR", entry count, then per entry name length (u16), value length (u32),
//! name, value, sorted by name; a CRC32C of everything before it ends the blob.
//!
//! Limits (documented in the README): names of 1 to 255 bytes (ERANGE beyond, as Linux);
//! values up to 64 KiB (E2BIG beyond); the names of one file together up to 64 KiB and its
//! blob up to 1 MiB (ENOSPC beyond, as a full ext4 attribute block).
//!
//! Permission checks are the front ends' (the library acts as root): FUSE gets them from
//! the kernel, the shim applies Linux's rules itself.

#![forbid(unsafe_code)]

use super::inode::{self, InodeCell};
use super::FsInner;
use crate::layout::inode::InodeRaw;
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const XATTR_NAME_MAX: usize = 255;
pub const XATTR_SIZE_MAX: usize = 65_536;
pub const XATTR_LIST_MAX: usize = 65_536;
pub const XATTR_BLOB_MAX: usize = 1 << 20;
const MAGIC: u32 = 0x5254_4158; // "XATR"

/// setxattr's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XattrMode {
    /// Create or replace.
    #[default]
    Any,
    /// XATTR_CREATE: fail with Exists if the name is there.
    Create,
    /// XATTR_REPLACE: fail with NoData if the name is not there.
    Replace,
}

impl XattrMode {
    /// The mode for setxattr(2)'s flags, or None for unknown bits or both set.
    pub fn from_linux_flags(flags: i32) -> Option<XattrMode> {
        match flags {
            0 => Some(XattrMode::Any),
            1 => Some(XattrMode::Create),
            2 => Some(XattrMode::Replace),
            _ => None,
        }
    }
}

/// The namespaces Linux knows; any other prefix is EOPNOTSUPP.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(Error::Range);
    }
    if name.contains(&0) {
        return Err(Error::Invalid("attribute name contains a NUL byte"));
    }
    const KNOWN: [&[u8]; 3] = [b"user.", b"trusted.", b"security."];
    let ok = KNOWN.iter().any(|p| name.starts_with(p) && name.len() > p.len())
        || name == b"system.posix_acl_access"
        || name == b"system.posix_acl_default";
    if !ok {
        return Err(Error::Unsupported("attribute namespace (user., trusted., security., system.posix_acl_*)"));
    }
    Ok(())
}

pub type Xattrs = BTreeMap<Vec<u8>, Vec<u8>>;

pub fn encode(x: &Xattrs) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&(x.len() as u32).to_le_bytes());
    for (k, v) in x {
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Parses a blob, checking every length, the order of names and the checksum.
pub fn decode(b: &[u8]) -> Result<Xattrs> {
    let bad = |why: &str| Error::corrupt(format!("extended attributes: {why}"));
    if b.len() < 12 {
        return Err(bad("blob too short"));
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(bad("checksum mismatch"));
    }
    let u32_at = |o: usize| u32::from_le_bytes(body[o..o + 4].try_into().expect("4 bytes"));
    if u32_at(0) != MAGIC {
        return Err(bad("bad magic"));
    }
    let count = u32_at(4) as usize;
    let mut out = Xattrs::new();
    let mut o = 8;
    for _ in 0..count {
        if o + 6 > body.len() {
            return Err(bad("entry header past the end"));
        }
        let nl = u16::from_le_bytes([body[o], body[o + 1]]) as usize;
        let vl = u32_at(o + 2) as usize;
        o += 6;
        if nl == 0 || nl > XATTR_NAME_MAX || vl > XATTR_SIZE_MAX || o + nl + vl > body.len() {
            return Err(bad("entry length out of range"));
        }
        let name = body[o..o + nl].to_vec();
        if out.last_key_value().is_some_and(|(k, _)| *k >= name) {
            return Err(bad("names out of order"));
        }
        out.insert(name, body[o + nl..o + nl + vl].to_vec());
        o += nl + vl;
    }
    if o != body.len() {
        return Err(bad("bytes after the last entry"));
    }
    Ok(out)
}

impl<D: PmDevice> FsInner<D> {
    /// The attributes of `ino` (empty if it has none).
    pub(crate) fn xattrs(&self, ino: Ino) -> Result<Xattrs> {
        let cell = self.cell(ino)?;
        let st = cell.state.read();
        if st.freed {
            return Err(Error::NotFound);
        }
        self.read_xattrs(&st.raw)
    }

    /// Reads the blob of an owner whose state the caller holds locked.
    fn read_xattrs(&self, raw: &InodeRaw) -> Result<Xattrs> {
        if raw.xattr_ino == 0 {
            return Ok(Xattrs::new());
        }
        let xcell = self.cell(Ino(raw.xattr_ino))?;
        let size = xcell.state.read().raw.size as usize;
        if size > XATTR_BLOB_MAX + XATTR_NAME_MAX + 64 {
            return Err(Error::corrupt(format!("extended attributes of size {size}")));
        }
        let mut buf = vec![0u8; size];
        let mut done = 0;
        while done < size {
            let n = self.read_at(&xcell, done as u64, &mut buf[done..])?;
            if n == 0 {
                return Err(Error::corrupt("extended attributes shorter than their size"));
            }
            done += n;
        }
        decode(&buf)
    }

    /// Changes one attribute: `Some(value)` sets it (as `mode` allows), `None` removes it
    /// (NoData if absent). Atomic and durable when it returns.
    pub(crate) fn change_xattr(&self, ino: Ino, name: &[u8], value: Option<&[u8]>, mode: XattrMode) -> Result<()> {
        check_name(name)?;
        if value.is_some_and(|v| v.len() > XATTR_SIZE_MAX) {
            return Err(Error::TooBig);
        }
        let cell = self.cell(ino)?;
        let mut st = cell.state.write();
        if st.freed {
            return Err(Error::NotFound);
        }
        let mut x = self.read_xattrs(&st.raw)?;
        let exists = x.contains_key(name);
        match (value, mode) {
            (Some(_), XattrMode::Create) if exists => return Err(Error::Exists),
            (Some(_), XattrMode::Replace) | (None, _) if !exists => return Err(Error::NoData),
            _ => {}
        }
        match value {
            Some(v) => x.insert(name.to_vec(), v.to_vec()),
            None => x.remove(name),
        };
        let names: usize = x.keys().map(|k| k.len() + 1).sum();
        let blob = encode(&x);
        if names > XATTR_LIST_MAX || blob.len() > XATTR_BLOB_MAX {
            return Err(Error::NoSpace);
        }
        self.switch_xattrs(&cell, &mut st, (!x.is_empty()).then_some(&blob))
    }

    /// Replaces the owner's whole blob (None: no attributes left).
    fn switch_xattrs(&self, cell: &InodeCell, st: &mut super::inode::InodeMem, blob: Option<&Vec<u8>>) -> Result<()> {
        let owner = cell.ino;
        let new_x = match blob {
            Some(b) => Some(self.write_xattr_inode(owner, b)?),
            None => None,
        };
        let old = (st.raw.xattr_ino != 0).then_some(Ino(st.raw.xattr_ino));
        let old_cell = match old.map(|o| self.cell(o)).transpose() {
            Ok(c) => c,
            Err(e) => {
                self.drop_unlinked(new_x.as_ref());
                return Err(e);
            }
        };
        let mut raw = st.raw;
        raw.xattr_ino = new_x.as_ref().map_or(0, |c| c.ino.0);
        raw.ctime_ns = inode::now_ns();
        let mut tx = self.journals.begin();
        inode::tx_write_inode(&mut tx, &self.geo, owner, &mut raw);
        let mut new_raw = new_x.as_ref().map(|c| {
            let mut r = c.state.read().raw;
            r.nlink = 1;
            r
        });
        if let (Some(c), Some(r)) = (&new_x, new_raw.as_mut()) {
            inode::tx_write_inode(&mut tx, &self.geo, c.ino, r);
        }
        let mut old_raw = old_cell.as_ref().map(|c| {
            let mut r = c.state.read().raw;
            r.nlink = 0;
            r
        });
        if let (Some(c), Some(r)) = (&old_cell, old_raw.as_mut()) {
            inode::tx_write_inode(&mut tx, &self.geo, c.ino, r);
        }
        if let Err(e) = tx.commit() {
            self.drop_unlinked(new_x.as_ref());
            return Err(e);
        }
        st.raw = raw;
        if let (Some(c), Some(r)) = (&new_x, new_raw) {
            c.state.write().raw = r;
        }
        if let (Some(c), Some(r)) = (old_cell, old_raw) {
            let mut ost = c.state.write();
            ost.raw = r;
            self.free_inode_locked(&c, &mut ost)?;
        }
        Ok(())
    }

    /// A fresh xattr inode of `owner` holding `blob`, still unlinked (nlink 0).
    fn write_xattr_inode(&self, owner: Ino, blob: &[u8]) -> Result<Arc<InodeCell>> {
        let cell = self.new_unlinked_file(owner)?;
        let mut done = 0;
        while done < blob.len() {
            match self.write_at(&cell, done as u64, &blob[done..]) {
                Ok(0) => {
                    self.drop_unlinked(Some(&cell));
                    return Err(Error::NoSpace);
                }
                Ok(n) => done += n,
                Err(e) => {
                    self.drop_unlinked(Some(&cell));
                    return Err(e);
                }
            }
        }
        Ok(cell)
    }

    /// Frees an xattr inode that never got linked (best effort: recovery frees it too).
    fn drop_unlinked(&self, cell: Option<&Arc<InodeCell>>) {
        if let Some(c) = cell {
            let mut st = c.state.write();
            let _ = self.free_inode_locked(c, &mut st);
        }
    }
}
