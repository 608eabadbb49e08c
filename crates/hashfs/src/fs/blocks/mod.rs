//! What the file system does on the mappings behind the block allocator (`BlockMap`:
//! the extent tree, radix tree, cuckoo table, SPFS's extent hashing and ctFS's page table;
//! ctFS's own features are in `fs/ctfs/`): the data path's verbs and unmapping.

mod fsck;
mod recovery;
mod stats;
mod unmap;
mod untorn;
mod verbs;
