//! POSIX ACLs as Linux stores them in `system.posix_acl_access` and
//! `system.posix_acl_default` (the `posix_acl_xattr` format: a version word, then entries of
//! tag, permissions and id), and the rules that tie them to the mode: an access ACL's
//! owner, mask (or group) and other entries are the mode's permission bits; a chmod
//! rewrites those three; a new file in a directory with a default ACL inherits it, masked
//! by the mode it was created with (`posix_acl_create`), instead of the umask.
//!
//! The kernel enforces ACLs through the mount (FUSE's POSIX ACL support); the library
//! stores them, keeps them in step with the mode and applies inheritance.

#![forbid(unsafe_code)]

use super::xattr::XattrMode;
use super::{FileSystem, SetAttr};
use crate::layout::{FileType, Ino};
use crate::pm::PmDevice;
use crate::{Error, Result};

pub const ACCESS: &[u8] = b"system.posix_acl_access";
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
pub const USER_OBJ: u16 = 0x01;
pub const USER: u16 = 0x02;
pub const GROUP_OBJ: u16 = 0x04;
pub const GROUP: u16 = 0x08;
pub const MASK: u16 = 0x10;
pub const OTHER: u16 = 0x20;
const UNDEFINED_ID: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub tag: u16,
    pub perm: u16,
    pub id: u32,
}

/// A valid ACL, entries in the kernel's order (tag, then id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl(pub Vec<Entry>);

impl Acl {
    /// Parses and validates as the kernel's `posix_acl_valid`: one owner, group and
    /// other entry, a mask when there are named entries, no duplicate ids, permissions
    /// of three bits.
    pub fn parse(b: &[u8]) -> Result<Acl> {
        let bad = || Error::Invalid("not a valid POSIX ACL");
        if b.len() < 4
            || !(b.len() - 4).is_multiple_of(8)
            || u32::from_le_bytes(b[..4].try_into().expect("4")) != VERSION
        {
            return Err(bad());
        }
        let mut e: Vec<Entry> = b[4..]
            .chunks_exact(8)
            .map(|c| Entry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes(c[4..8].try_into().expect("4")),
            })
            .collect();
        e.sort_by_key(|x| (x.tag, x.id));
        let count = |t| e.iter().filter(|x| x.tag == t).count();
        let named = count(USER) + count(GROUP);
        let ok = count(USER_OBJ) == 1
            && count(GROUP_OBJ) == 1
            && count(OTHER) == 1
            && count(MASK) == usize::from(named > 0 || count(MASK) == 1)
            && e.iter()
                .all(|x| x.perm & !7 == 0 && matches!(x.tag, USER_OBJ | USER | GROUP_OBJ | GROUP | MASK | OTHER))
            && e.windows(2).all(|w| (w[0].tag, w[0].id) != (w[1].tag, w[1].id));
        if !ok {
            return Err(bad());
        }
        for x in &mut e {
            if !matches!(x.tag, USER | GROUP) {
                x.id = UNDEFINED_ID;
            }
        }
        Ok(Acl(e))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = VERSION.to_le_bytes().to_vec();
        for x in &self.0 {
            out.extend_from_slice(&x.tag.to_le_bytes());
            out.extend_from_slice(&x.perm.to_le_bytes());
            out.extend_from_slice(&x.id.to_le_bytes());
        }
        out
    }

    /// The three entries a mode alone gives.
    pub fn from_mode(mode: u32) -> Acl {
        Acl(vec![
            Entry { tag: USER_OBJ, perm: ((mode >> 6) & 7) as u16, id: UNDEFINED_ID },
            Entry { tag: GROUP_OBJ, perm: ((mode >> 3) & 7) as u16, id: UNDEFINED_ID },
            Entry { tag: OTHER, perm: (mode & 7) as u16, id: UNDEFINED_ID },
        ])
    }

    fn get(&self, tag: u16) -> Option<u16> {
        self.0.iter().find(|x| x.tag == tag).map(|x| x.perm)
    }

    fn set(&mut self, tag: u16, perm: u16) {
        if let Some(x) = self.0.iter_mut().find(|x| x.tag == tag) {
            x.perm = perm;
        }
    }

    /// Whether the mode says all of it (no named entries, no mask).
    pub fn is_minimal(&self) -> bool {
        self.0.len() == 3
    }

    /// The permission bits (0o777) this ACL stands for: owner, mask (else group), other.
    pub fn mode_bits(&self) -> u32 {
        let g = self.get(MASK).or(self.get(GROUP_OBJ)).unwrap_or(0);
        (self.get(USER_OBJ).unwrap_or(0) as u32) << 6 | (g as u32) << 3 | self.get(OTHER).unwrap_or(0) as u32
    }

    /// chmod: the owner, mask (else group) and other entries take the new bits.
    pub fn chmod(&mut self, mode: u32) {
        self.set(USER_OBJ, ((mode >> 6) & 7) as u16);
        let class = if self.get(MASK).is_some() { MASK } else { GROUP_OBJ };
        self.set(class, ((mode >> 3) & 7) as u16);
        self.set(OTHER, (mode & 7) as u16);
    }

    /// `posix_acl_create_masq`: a copy of a default ACL masked by the creation mode;
    /// returns it and the mode bits it leaves.
    pub fn create_masq(&self, mode: u32) -> (Acl, u32) {
        let mut a = self.clone();
        let owner = a.get(USER_OBJ).unwrap_or(0) & ((mode >> 6) & 7) as u16;
        a.set(USER_OBJ, owner);
        let class = if a.get(MASK).is_some() { MASK } else { GROUP_OBJ };
        let group = a.get(class).unwrap_or(0) & ((mode >> 3) & 7) as u16;
        a.set(class, group);
        let other = a.get(OTHER).unwrap_or(0) & (mode & 7) as u16;
        a.set(OTHER, other);
        let bits = a.mode_bits();
        (a, (mode & !0o777) | bits)
    }
}

/// What a new inode takes from its directory: its permission bits and the ACLs to set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inherited {
    pub perm: u32,
    pub access: Option<Vec<u8>>,
    pub default: Option<Vec<u8>>,
}

impl<D: PmDevice> FileSystem<D> {
    /// The ACL of `ino` named `name` (ACCESS or DEFAULT), if it has one.
    pub fn acl(&self, ino: Ino, name: &[u8]) -> Result<Option<Acl>> {
        let _in = self.inner.enter();
        match self.get_xattr(ino, name) {
            Ok(v) => Acl::parse(&v).map(Some),
            Err(Error::NoData) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// setxattr of an ACL, as Linux: validated; an access ACL sets the mode's permission
    /// bits and is not stored when the mode says all of it; a default ACL is for
    /// directories only (EACCES otherwise); an empty value removes it.
    pub(super) fn set_acl(&self, ino: Ino, name: &[u8], value: &[u8], mode: XattrMode) -> Result<()> {
        let md = self.getattr(ino)?;
        if name == DEFAULT && !md.is_dir() {
            return Err(if value.is_empty() { Error::NoData } else { Error::Access });
        }
        if value.is_empty() && name == DEFAULT {
            return self.remove_xattr(ino, name);
        }
        let acl = Acl::parse(value)?;
        if name == ACCESS {
            let perm = (md.perm & !0o777) | acl.mode_bits();
            if perm != md.perm {
                self.setattr(ino, &SetAttr { perm: Some(perm), ..Default::default() })?;
            }
            if acl.is_minimal() {
                return match self.remove_xattr(ino, name) {
                    Err(Error::NoData) if mode != XattrMode::Replace => Ok(()),
                    r => r,
                };
            }
        }
        self.inner.change_xattr(ino, name, Some(&acl.encode()), mode)
    }

    /// After a chmod: the access ACL's owner, mask and other entries follow the new bits.
    pub fn chmod_acl(&self, ino: Ino, perm: u32) -> Result<()> {
        let _in = self.inner.enter();
        if let Some(mut a) = self.acl(ino, ACCESS)? {
            a.chmod(perm);
            self.inner.change_xattr(ino, ACCESS, Some(&a.encode()), XattrMode::Any)?;
        }
        Ok(())
    }

    /// What a new inode created in `parent` with `mode` (permission bits) takes: with a
    /// default ACL there, that ACL masked by the mode (and, for a directory, the default
    /// ACL itself); without one, the mode less the umask.
    pub fn inherit(&self, parent: Ino, mode: u32, umask: u32, ftype: FileType) -> Result<Inherited> {
        let _in = self.inner.enter();
        let Some(d) = self.acl(parent, DEFAULT)? else {
            return Ok(Inherited { perm: mode & 0o7777 & !umask, access: None, default: None });
        };
        let (a, perm) = d.create_masq(mode & 0o7777);
        Ok(Inherited {
            perm,
            access: (!a.is_minimal()).then(|| a.encode()),
            default: (ftype == FileType::Directory).then(|| d.encode()),
        })
    }

    /// Sets the ACLs of a new inode (after it was created with `inh.perm`).
    pub fn apply_inherited(&self, ino: Ino, inh: &Inherited) -> Result<()> {
        let _in = self.inner.enter();
        if let Some(a) = &inh.access {
            self.inner.change_xattr(ino, ACCESS, Some(a), XattrMode::Any)?;
        }
        if let Some(d) = &inh.default {
            self.inner.change_xattr(ino, DEFAULT, Some(d), XattrMode::Any)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        for &(t, p, i) in entries {
            v.extend_from_slice(&t.to_le_bytes());
            v.extend_from_slice(&p.to_le_bytes());
            v.extend_from_slice(&i.to_le_bytes());
        }
        v
    }

    #[test]
    fn parse_validates_as_the_kernel() {
        let good = acl(&[(USER_OBJ, 6, 0), (USER, 4, 1000), (GROUP_OBJ, 4, 0), (MASK, 6, 0), (OTHER, 0, 0)]);
        let a = Acl::parse(&good).unwrap();
        assert_eq!(a.mode_bits(), 0o660);
        assert_eq!(Acl::parse(&a.encode()).unwrap(), a);
        assert!(
            Acl::parse(&acl(&[(USER_OBJ, 6, 0), (USER, 4, 1000), (GROUP_OBJ, 4, 0), (OTHER, 0, 0)])).is_err(),
            "named entry without a mask"
        );
        assert!(Acl::parse(&acl(&[(USER_OBJ, 6, 0), (OTHER, 0, 0)])).is_err(), "no group entry");
        assert!(
            Acl::parse(&acl(&[
                (USER_OBJ, 6, 0),
                (USER, 4, 7),
                (USER, 2, 7),
                (GROUP_OBJ, 4, 0),
                (MASK, 6, 0),
                (OTHER, 0, 0)
            ]))
            .is_err(),
            "duplicate id"
        );
        assert!(Acl::parse(&acl(&[(USER_OBJ, 8, 0), (GROUP_OBJ, 4, 0), (OTHER, 0, 0)])).is_err(), "perm bits");
        assert!(Acl::parse(&good[..good.len() - 1]).is_err());
    }

    #[test]
    fn chmod_and_inheritance_follow_the_mask() {
        let d = Acl::parse(&acl(&[(USER_OBJ, 7, 0), (USER, 7, 1000), (GROUP_OBJ, 5, 0), (MASK, 7, 0), (OTHER, 5, 0)]))
            .unwrap();
        // A file created 0666 inherits the default ACL; the mask takes the group bits.
        let (a, mode) = d.create_masq(0o100666);
        assert_eq!(mode, 0o100664, "owner rw, mask rw, other r");
        assert_eq!(a.get(USER), Some(7), "named entries stay; the mask limits them");
        let mut a = a;
        a.chmod(0o640);
        assert_eq!(
            (a.get(USER_OBJ), a.get(MASK), a.get(OTHER), a.get(GROUP_OBJ)),
            (Some(6), Some(4), Some(0), Some(5))
        );
        assert_eq!(a.mode_bits(), 0o640);
        let mut m = Acl::from_mode(0o754);
        assert!(m.is_minimal());
        m.chmod(0o700);
        assert_eq!(m.mode_bits(), 0o700);
    }
}
