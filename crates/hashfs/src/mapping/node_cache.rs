//! The DRAM page cache of extent-tree nodes behind `extent-tree-cached`: the Strata
//! baseline of the HashFS paper's §4.7, which reads mapping nodes through a page cache
//! the way a block-device file system does, so that the cost of caching PM in DRAM can be
//! measured against reading the nodes in place.
//!
//! A lookup that misses copies the whole 4 KiB node into DRAM; later lookups read the
//! copy. Changes go to PM (through the transaction) and drop the copies of the pages they
//! changed or freed once they commit. When full, the cache drops everything (a simple,
//! predictable policy; the benchmark's working sets fit).

#![forbid(unsafe_code)]

use super::staged::MemRead;
use crate::pm::{DevOffset, PmDevice};
use parking_lot::RwLock;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

type PageBuf = Arc<[u64; 512]>;

pub struct NodeCache {
    pages: RwLock<HashMap<u64, PageBuf>>,
    capacity: usize,
}

impl NodeCache {
    pub fn new(capacity: usize) -> Self {
        NodeCache { pages: RwLock::new(HashMap::new()), capacity }
    }

    /// A reader for one lookup (remembers the page it read last).
    pub fn reader<'a, D: PmDevice>(&'a self, dev: &'a D) -> CachedReader<'a, D> {
        CachedReader { cache: self, dev, last: RefCell::new(None) }
    }

    pub fn invalidate(&self, pages: &[u64]) {
        if pages.is_empty() {
            return;
        }
        let mut p = self.pages.write();
        for off in pages {
            p.remove(off);
        }
    }

    /// Drops every cached page.
    pub fn clear(&self) {
        self.pages.write().clear();
    }

    fn page<D: PmDevice>(&self, dev: &D, off: DevOffset) -> PageBuf {
        let off = off.0;
        if let Some(p) = self.pages.read().get(&off) {
            return p.clone();
        }
        let mut buf = Box::new([0u64; 512]);
        dev.read(DevOffset(off), bytemuck::cast_slice_mut(&mut buf[..]));
        let page: PageBuf = Arc::from(buf);
        let mut w = self.pages.write();
        if w.len() >= self.capacity {
            w.clear();
        }
        w.insert(off, page.clone());
        page
    }
}

pub struct CachedReader<'a, D: PmDevice> {
    cache: &'a NodeCache,
    dev: &'a D,
    last: RefCell<Option<(u64, PageBuf)>>,
}

impl<D: PmDevice> MemRead for CachedReader<'_, D> {
    fn load_u64(&self, off: DevOffset) -> u64 {
        let off = off.0;
        let page = off & !4095;
        let mut last = self.last.borrow_mut();
        if let Some((p, buf)) = &*last {
            if *p == page {
                return buf[((off % 4096) / 8) as usize];
            }
        }
        let buf = self.cache.page(self.dev, DevOffset(page));
        let v = buf[((off % 4096) / 8) as usize];
        *last = Some((page, buf));
        v
    }
}
