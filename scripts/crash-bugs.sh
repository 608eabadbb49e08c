#!/usr/bin/env bash
# Proof that the crash explorer bites: each deliberate bug below is switched on, alone, in a
# scratch copy of the tree where scripts/plant-bugs.py planted them all (a few it cannot
# switch at run time are applied alone and rebuilt), and the explorer (or, for the rollback
# order, the journal's exhaustive exploration of two open transactions; for SPFS's stacked
# mode, its own explorer over the PM side, crates/hashfs-spfs/src/crashtest.rs; for two
# HashFS slot orders that the explorer's small images or its sampling do not reach, a test
# in crates/hashfs/tests/untorn_writes.rs that enumerates every crash image over the slots'
# lines) must fail on it.
# The copy with no bug switched on passes the same checks first, so every failure is the
# bug's.
#
#   ./scripts/crash-bugs.sh            # every bug
#   ./scripts/crash-bugs.sh NAME...    # some (names below)
#   ./scripts/crash-bugs.sh --changed  # those whose file differs from HEAD (the quick tier
#                                      # of scripts/test.sh; HASHFS_CHANGED_SINCE=REV
#                                      # compares with REV instead), or whose own change
#                                      # in scripts/bugs/ does (all of them when the
#                                      # planting does), or none
#   ./scripts/crash-bugs.sh --check-patterns  # each bug still applies to the tree (no build;
#                                      # the quick tier runs it)
#   ./scripts/crash-bugs.sh --table    # docs/crash-bugs.md's table (the tests check it is
#                                      # this list)
#
# Exit 0 only if every bug was caught. The scratch tree and its build stay in
# ${HASHFS_BUGS_DIR:-/tmp/hashfs-crash-bugs} so that reruns rebuild incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
    [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
work=${HASHFS_BUGS_DIR:-/tmp/hashfs-crash-bugs}
mkdir -p "$work/src"
export CARGO_TARGET_DIR="$work/target"
# The explorer's tests (tests/crash_consistency.rs) crash recovery on the first 2 images of
# each crash point, as the quick tier's bounded run does: every recovery crashed, their
# checks with no bug switched on took 110 s of the baseline (2026-12-07), and each bug they
# catch is caught so.
export HASHFS_CRASH_RECOVERY_IMAGES=${HASHFS_CRASH_RECOVERY_IMAGES:-2}
seed=${HASHFS_CRASH_SEED:-1}

# name | file | what the bug does | how it is checked. Each bug's change is in
# scripts/bugs/ under its name (a new bug: an entry here, and there a `@bug` whose `lines`
# gives the tree's lines and the bug's, or whose `plant` writes the switch out).
bugs=(
    "no-flush-rollback|crates/hashfs/src/journal.rs|recovery rolls back without flushing the restored bytes|ops chmod,mkdir,rename"
    "reverse-rollback|crates/hashfs/src/journal.rs|recovery undoes open transactions oldest first|unit transactions_open_in_two_journals_roll_back_newest_first"
    "rename-undo-fence|crates/hashfs/src/journal.rs|the fence between a transaction's undo log and its in-place writes is gone (rename's ordering)|ops rename,rename-across,rename-replace,exchange"
    "dir-insert-flush|crates/hashfs/src/fs/dir.rs|a new directory entry's name is not flushed before the transaction links it|ops create-long,rename-long,mkdir,link"
    "size-before-data|crates/hashfs/src/fs/data.rs|a growing write commits the new size before it stores the data|ops append,write-past-eof,fill-hole"
    "fast-append-no-fence|crates/hashfs/src/fs/append.rs|a fast append stores the new size and block count with no fence after the data and the new blocks' keys|ops append,write-past-eof"
    "tag-unchecked|crates/hashfs/src/fs/hashfs/append_tag.rs|recovery keeps the tagged size of a one-fence append without checking its bytes|ops append-small,append-cross"
    "tag-parity-fixed|crates/hashfs/src/fs/append.rs|every one-fence append tags its size with the same parity (a crash that leaves the next one's block-count word beside the last one's size word drops the last)|workload ace:append-small,append-small"
    "tag-overwrite-kept|crates/hashfs/src/fs/hashfs/append_tag.rs|an overwrite inside the file leaves a one-fence append's size tagged (its bytes change under the check)|workload ace:append-small,overwrite-tail"
    "untag-range-wrong|crates/hashfs/src/fs/hashfs/append_tag.rs|an overwrite takes the bytes a one-fence append's check covers for the file's first ones, not its last: one of the appended bytes, overwritten, leaves the size tagged (its bytes change under the check)|workload ace:append-small,overwrite-tail"
    "xattr-new-unlinked|crates/hashfs/src/fs/xattr.rs|the switch to a new attribute inode leaves it with no link on the media|ops setxattr,setxattr-replace,removexattr"
    "xattr-orphaned-by-unlink|crates/hashfs/src/fs/data.rs|freeing a file does not unlink its attribute inode in the same transaction|ops unlink,rename-replace"
    "evacuate-no-flush|crates/hashfs/src/fs/hashfs/evacuate.rs|HashFS's grouped placement moves a block out of a group without flushing its copy before the transaction that remaps it|grouped write-chunk,fallocate-chunk"
    "regions-move-no-flush|crates/hashfs/src/fs/hashfs/evacuate.rs|a block move (the shared one of the grouped placement's evacuation and the regions placement's openings) does not flush its copy before the transaction that remaps it, checked on the regions placement|regions append"
    "regions-unmarked-opening|crates/hashfs/src/mapping/hashfs/groups.rs|the regions placement opens a group without the in-progress mark (after a crash before the moves are done, lookups no longer try the bucket a key had before it was moved)|regions append"
    "regions-open-word-unflushed|crates/hashfs/src/mapping/hashfs/groups.rs|the regions placement opens a group without flushing its directory word before keys move into it (after a crash the group may not be open, its keys found by no lookup)|regions append"
    "untorn-copy-no-flush|crates/hashfs/src/fs/untorn.rs|an untorn write's moved block is stored cached (no flush before the commit's fence)|ops untorn-overwrite,untorn-limit"
    "untorn-unlogged-key|crates/hashfs/src/fs/hashfs/untorn.rs|an untorn write publishes a moved block's new HashFS key without an undo record|test untorn_writes an_untorn_write_across_two_blocks_whose_new_slots_come_first_is_whole_or_absent"
    "free-slots-no-fence|crates/hashfs/src/fs/hashfs/slots.rs|freeing HashFS slots stores tombstones with no fence first: a live copy's tombstone may reach the media before an older copy's pending one|test untorn_writes a_hole_punched_after_a_key_switch_never_revives_the_older_copy"
    "switch-one-fence|crates/hashfs/src/fs/hashfs/untorn.rs|HashFS's key switch inside one block, new slot after the old: the old slot's tombstone goes with the new data and key, no fence between|ops untorn-small,untorn-block"
    "switch-key-with-data|crates/hashfs/src/fs/hashfs/untorn.rs|HashFS's key switch inside one block, new slot before the old: the new key goes with the new data, no fence between|workload ace:untorn-small,untorn-small"
    "switch-copies-kept|crates/hashfs/src/fs/hashfs/recovery.rs|recovery keeps both copies of a key that an interrupted key switch left|ops untorn-small,untorn-block"
    "strict-ignored|crates/hashfs/src/fs/data.rs|a strict-mode mount writes as a relaxed one|strict overwrite,overwrite-small"
    "untorn-logged-in-place|crates/hashfs/src/fs/untorn.rs|an untorn write stores a grouped block's new bytes in place without their undo record|grouped-workload ace:write-chunk,untorn-hole"
    "pswap-split-tx|crates/hashfs/src/fs/ctfs/pswap.rs|a pswap between files writes the second file's inode in a transaction of its own, after the one that swaps the pages|ctfs pswap,pswap-grow,truncate-up"
    "stacked-handle-first|crates/hashfs-spfs/src/absorb.rs|SPFS promotion names the lower inode before its PM copy has the file's length (the mount then takes the copy as complete and cuts the lower file to it)|stacked"
    "stacked-lower-shrink-first|crates/hashfs-spfs/src/absorb.rs|a promoted file's truncation shrinks the lower file before its PM copy|stacked"
    "stacked-drop-before-copy|crates/hashfs-spfs/src/absorb.rs|write-back removes the PM copy before the lower file holds its bytes|stacked"
    "stacked-no-length-repair|crates/hashfs-spfs/src/absorb.rs|the mount leaves a lower file longer than its PM copy (bytes truncated before a crash come back when the file grows)|stacked"
    "fsync-forgets-times|crates/hashfs/src/fs/file.rs|fsync leaves the times of the file's writes in DRAM (they may lag only until it)|workload ace:append,write-past-eof,fsync-g,chmod"
    "pswap-untorn-size-first|crates/hashfs/src/fs/ctfs/untorn_pswap.rs|ctFS's atomic write commits the file's new size in a transaction before the one that swaps the staged pages in (the released ctFS sets the size before the data)|ctfs untorn-pswap,untorn-pswap-append"
    "shrink-tail-kept|crates/hashfs/src/fs/data.rs|a shrink leaves the rest of its new last block as it was (a mapping of the block shows the truncated bytes)|ops truncate-down"
    "recovery-tails-kept|crates/hashfs/src/fs/recovery.rs|recovery leaves bytes past EOF in a file's last block (a shrink's size durable before its zeroing, an append's bytes before its size)|ops append-small,append,truncate-down"
    "clean-flag-first|crates/hashfs/src/fs/mod.rs|an unmount marks the image clean before it stores the times left in DRAM and makes one-fence appends' sizes plain (a crash after the flag skips recovery)|workload ace:append-small,unmount"
    "rollback-unfenced|crates/hashfs/src/journal.rs|recovery marks the journals empty with no fence after the rollback's restores (a crash of recovery may leave a journal empty before the bytes it restored)|ops chmod,mkdir,rename"
    "settle-blocks-first|crates/hashfs/src/fs/hashfs/append_tag.rs|recovery settles a one-fence append's size storing the block-count word before the size word (a crash of recovery between leaves the tagged size beside a plain block count, taken as whole)|recoveries append-small,append-cross"
    "superblock-primary-first|crates/hashfs/src/fs/mod.rs|a mount writes the primary superblock first even when a crash tore the secondary (a crash of the mount after a crashed mount leaves no whole copy)|ops chmod,mkdir,rename"
    "sync-forgets-times|crates/hashfs/src/fs/api.rs|sync leaves the times of writes in DRAM (they may lag only until a sync or the file's fsync)|workload ace:overwrite,append,sync,chmod"
    "purge-empties-then-checks|crates/hashfs/src/mapping/hashfs/purge.rs|HashFS's purge empties a tombstone before it looks for keys past it, and makes it a tombstone again if one needs it: a power failure between is repaired by recovery's probe-path pass, but a takeover after a death has none (a death leaves every store visible, and this one leaves keys unreachable)|test crash_consistency explore_process_deaths_on_a_crowded_table"
    "purge-unlocked|crates/hashfs/src/mapping/hashfs/purge.rs|HashFS's tombstone purge runs without the purge lock (a purge between an insert's probe and its claim leaves an EMPTY slot on the new key's path)|unit threads_inserting_freeing_and_purging_keep_every_path"
    "regions-stale-bucket|crates/hashfs/src/mapping/hashfs/mod.rs|a reservation in the regions placement takes the bucket its request found before an opening (the key goes to a group no lookup reaches once the opening is done)|unit a_reservation_ignores_a_bucket_found_before_an_opening"
    "slot-run-unflushed|crates/hashfs/src/mapping/hashfs/mod.rs|the last run of slot words a request stores (its new keys, its tombstones) is never flushed before the fence that makes the size durable|ops append,write-past-eof"
    "slot-run-first-word|crates/hashfs/src/mapping/hashfs/mod.rs|a run of consecutive slot words (a claimed group's keys) is flushed only at its first word|grouped write-chunk"
    "shared-table-own-state|crates/hashfs/src/fs/shared/join.rs|a participant joining others on an image of the regions placement does not take the region's table state (its own is not counted: the others' open groups and claims are not in it, their files' blocks are looked for where they are not)|test shared_regions openings_and_claims_of_one_participant_are_found_by_another"
    "takeover-keeps-table-state|crates/hashfs/src/fs/shared/mod.rs|a takeover after a participant's death recovers the image but leaves the table state in the region as the dead call left it (groups count keys the recovery freed, or miss keys it restored)|regions-death append"
    "relocated-block-unnoted|crates/hashfs/src/fs/hashfs/evacuate.rs|a block moved by an opening of the regions placement (or a claim's evacuation) does not name its file in the ring of changes (other participants keep translations to the block's old slot, which another file may take)|test shared_regions openings_and_claims_of_one_participant_are_found_by_another"
    "claim-filter-never-counted-down|crates/hashfs/src/mapping/hashfs/groups.rs|a dropped claim stays counted in the claim filter (lookups of its chunk walk the group directory for nothing: on a full image, the whole claim window)|test grouped_placement whole_chunks_land_on_aligned_groups_and_claims_follow_the_file"
    "claim-filter-counted-down-live|crates/hashfs/src/mapping/hashfs/groups.rs|a claim that succeeds is counted out of the claim filter as a failed one is (lookups of its blocks skip the directory and find holes)|test grouped_placement whole_chunks_land_on_aligned_groups_and_claims_follow_the_file"
    "regions-bucket-kept-across-tables|crates/hashfs/src/mapping/hashfs/regions.rs|the bucket a thread keeps is taken for the same key and count under another table's seed (a process with two images places keys of one where lookups do not look)|unit kept_buckets_are_each_tables_own"
    "regions-batch-bucket-unchecked|crates/hashfs/src/mapping/hashfs/mod.rs|a batch's lookup in the regions placement walks only the chain of the bucket its prefetch found, even while an opening's moves are not done (keys not moved yet are not found: their blocks read as holes)|unit a_batch_finds_keys_an_opening_has_not_moved_yet"
    "claim-without-cas|crates/hashfs/src/mapping/hashfs/mod.rs|HashFS's slot claim checks the slot is free and then stores its reservation, without a compare-and-swap (two threads claim one slot: one block for two files)|unit threads_claiming_at_once_never_share_a_slot"
    "dir-insert-split-lock|crates/hashfs/src/fs/ops.rs|a create checks that its name is free, lets the directory's lock go and takes it again to insert (two threads both insert one name)|test races threads_creating_one_set_of_names_make_each_once"
    "append-offset-unlocked|crates/hashfs/src/fs/data.rs|an append reads the end of file before it takes the file's lock (two appends at once write at one offset, one record lost)|test races threads_appending_to_one_file_lose_no_record"
    "rename-replace-drops-links|crates/hashfs/src/fs/rename.rs|a rename over a name of a file with other hard links drops all its links (the file is freed under its other names)|workload ace:link,rename-replace"
    "rename-source-in-place|crates/hashfs/src/fs/rename.rs|a rename to a new name clears the source entry in place, outside its transaction (NOVA's rename bug: a crash before the commit loses the file)|ops rename,rename-across"
    "symlink-target-cached|crates/hashfs/src/fs/ops.rs|a new symlink's target is stored with cached stores and never flushed (the commit's fence does not make it durable)|ops symlink"
    "link-count-unlogged|crates/hashfs/src/fs/ops.rs|link adds the new name in its transaction but leaves the file's raised link count in DRAM (link count after an in-place update)|ops link"
    "mkdir-parent-count|crates/hashfs/src/fs/ops.rs|mkdir does not count the new directory's '..' in its parent's link count|ops mkdir"
    "rename-dir-parent-kept|crates/hashfs/src/fs/rename.rs|a directory renamed into another directory keeps its old parent ('..'; a rename record missing the new parent)|ops rename-dir"
    "unlink-keeps-count|crates/hashfs/src/fs/ops.rs|unlink removes the name but leaves the file's link count (the inode is never freed: a leak after every unlink)|ops unlink"
    "rmdir-parent-count|crates/hashfs/src/fs/ops.rs|rmdir leaves the parent's link count counting the removed directory's '..'|ops rmdir"
    "exchange-one-entry|crates/hashfs/src/fs/rename.rs|an exchange points the source's entry at the target but leaves the target's entry as it was (two names of one inode, the other inode unnamed)|ops exchange"
    "punch-partial-unflushed|crates/hashfs/src/fs/fallocate.rs|a hole punch zeroes the partial blocks at its ends without flushing them (the zeros may never reach the media)|ops punch"
    "truncate-frees-first|crates/hashfs/src/fs/data.rs|a HashFS shrink frees the blocks past the new size before the transaction that commits it (a crash between leaves the old size over freed blocks)|ops truncate-down"
    "unlink-entry-in-place|crates/hashfs/src/fs/ops.rs|unlink clears the directory entry in place, outside the transaction that drops the link count|ops unlink"
    "create-inode-unwritten|crates/hashfs/src/fs/ops.rs|a create commits the new directory entry without writing the new inode in its transaction|ops create"
    "setattr-in-place|crates/hashfs/src/fs/ops.rs|chmod, chown and utimens store the inode in place, outside a transaction (a crash may tear it across its cache lines)|ops chmod,chown,utimens"
    "append-key-unflushed|crates/hashfs/src/fs/hashfs/verbs.rs|a fast append stores its new blocks' HashFS keys without flushing them (the size that covers them may be durable first)|ops append,write-past-eof"
    "write-before-active-mark|crates/hashfs/src/journal.rs|a transaction stores each write in place right after its undo record, before the fence and the journal's active mark (a process killed between leaves a change that no recovery undoes)|death create,mkdir,truncate-down"
    "region-replaced-twice|crates/hashfs/src/share/attach.rs|a process that finds an image's shared region stale replaces it without checking, under the stale file's lock, that no other process replaced it first (two processes end on two regions)|test shared_locks a_stale_region_is_replaced_once"
    "region-created-over|crates/hashfs/src/share/attach.rs|a new shared region is renamed into place, over one another process may have made and joined meanwhile, rather than linked only if none is there|test shared_locks racing_attaches_make_one_region"
    "enospc-keeps-inode|crates/hashfs/src/fs/ops.rs|a symlink whose target block finds the device full keeps the inode it took (a number lost until the next mount)|test crash_consistency explore_full_device"
    "free-while-open|crates/hashfs/src/fs/ops.rs|a file whose last name goes is freed at once, though descriptors still have it open (their writes and truncates then fail, and its blocks may be reused under them)|test crash_consistency explore_several_descriptors"
    "create-in-removed-dir|crates/hashfs/src/fs/ops.rs|a create through a handle of a removed directory adds the entry to the dead directory (its file then has no path, and is leaked when the directory is freed)|test crash_consistency explore_several_descriptors"
    "entry-flush-short|crates/hashfs/src/fs/dir.rs|a new directory entry is flushed only up to 256 bytes (a name of 255 bytes, 288 with its header, leaves its last cache line unflushed)|ops create-max,rename-max,link-max"
    "description-offset-unlocked|crates/hashfs/src/share/descriptions.rs|an open file description's offset is read and moved without its lock (a forked child and its parent reading through one descriptor use one offset twice)|test shared_locks two_processes_sharing_a_description_move_its_offset_in_turn"
    "description-claimed-twice|crates/hashfs/src/share/descriptions.rs|a free description slot is claimed with a plain store instead of a compare-and-swap (two opens at once get one slot)|test shared_locks descriptions_are_allocated_once_held_by_participants_and_freed_by_the_last"
    "open-inode-counted-after|crates/hashfs/src/share/image.rs|a hold of an open inode is counted after its bit is set: a participant killed between the two leaves a bit its count does not show, which its reaper then passes over (the inode held for good)|unit share::image::tests::a_holder_killed_between_its_count_and_its_bit_leaves_no_hold_unseen"
    "description-counted-after|crates/hashfs/src/share/descriptions.rs|a fork's child takes its bit on a description before counting it: a participant killed between the two leaves a bit its count does not show, which its reaper then passes over (the description held for good)|unit share::descriptions::tests::a_holder_killed_between_its_count_and_its_bit_leaves_no_hold_unseen"
    "set-claim-unfenced|crates/hashfs/src/share/participant_set.rs|a claim of an empty participant set reads the set's other words without a fence after claiming its own (two participants in different words both claim one description)|test set_model two_claims_in_different_words_never_both_succeed"
    "set-remove-unfenced|crates/hashfs/src/share/participant_set.rs|a participant leaving a set reads the other words without a fence after clearing its own (two last holders of a description each see the other, and its OFD locks stay for good)|test set_model two_holders_letting_go_at_once_never_both_see_the_other"
    "shared-no-catch-up|crates/hashfs/src/fs/shared/mod.rs|a participant that takes the image lock does not read again the inodes others changed since it last held it (its cached copies, directory indexes and translations stay stale)|test shared_mount a_change_in_one_participant_is_seen_by_the_next_call_of_another"
    "shared-frees-open-elsewhere|crates/hashfs/src/fs/ops.rs|an unlinked file is freed at the last close in one participant though another still has it open|test shared_mount an_unlinked_file_stays_while_another_participant_has_it_open"
    "shared-joiner-recovers|crates/hashfs/src/fs/shared/join.rs|a participant joining a mounted image runs the first mount's recovery, which frees the unlinked files others have open|test shared_mount an_unlinked_file_stays_while_another_participant_has_it_open"
    "shared-takeover-no-recovery|crates/hashfs/src/fs/shared/mod.rs|a participant that takes the image lock over from a dead one goes on without recovering what it left half done (its journal not rolled back, its strays kept)|death create,mkdir,append"
    "shared-call-unlocked|crates/hashfs/src/fs/shared/mod.rs|a call of a shared mount catches up and publishes without taking the image lock (two participants change one directory at once)|test shared_mount threads_of_two_participants_creating_in_one_directory"
    "shared-times-hidden|crates/hashfs/src/fs/times.rs|a write on a shared mount leaves the times it sets in DRAM only, where the other participants do not read them (a stat elsewhere shows the times before the write)|test shared_mount a_change_in_one_participant_is_seen_by_the_next_call_of_another"
    "shared-tag-unread|crates/hashfs/src/fs/hashfs/append_tag.rs|a participant reads an inode whose size another left tagged by a one-fence append as it lies on the media (the tag's bits taken for the size)|test shared_mount a_change_in_one_participant_is_seen_by_the_next_call_of_another"
    "fork-offset-unshared|crates/hashfs-preload/src/shim/fork.rs|a descriptor's position stays the process's own after a fork shares its description (parent and child write at one offset, over each other)|test forks forked_children_share_their_parents_descriptors"
    "fork-child-uncounted|crates/hashfs/src/fs/shared/fork.rs|a fork is not counted in the image's forks word until its child joins: the parent lets go at once of what it closes and unmaps right after the fork, under the child (before 2026-12-07, when the child's slot was not yet reserved before the fork, a parent leaving first also marked the image clean and removed the region under the child)|test shared_fork_closes what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs"
    "fork-descriptions-not-adopted|crates/hashfs/src/share/descriptions.rs|a forked child does not take over the descriptions it inherits (its bit not set, the fork not uncounted: a shared description outlives its last close)|test shared_fork a_forked_child_joins_and_a_parent_leaving_first_leaves_the_image_to_it"
    "exec-list-uninterposed|crates/hashfs-interpose/src/export.rs|the variadic execs (execl, execlp, execle) are not interposed: glibc's own reach its execve inside, and no descriptor is handed over|test exec the_variadic_execs_hand_descriptors_over"
    "daemon-uninterposed|crates/hashfs-interpose/src/export.rs|daemon() is glibc's, whose fork, chdir and dup2s are its internal calls: its child is a fork the shim never prepared (tmux's server cannot bind its socket in the image: EIO), and the /dev/null it puts on the standard descriptors leaves the shim serving the parent's file there|test processes a_daemon_and_a_child_on_a_terminal_keep_the_image"
    "forkpty-uninterposed|crates/hashfs-interpose/src/export.rs|forkpty() and login_tty() are glibc's: the child is a fork the shim never prepared (its paths in the image fail with EIO), and the terminal put on its standard descriptors leaves the shim serving the parent's file there|test processes a_daemon_and_a_child_on_a_terminal_keep_the_image"
    "wordexp-uninterposed|crates/hashfs-interpose/src/export.rs|wordexp is glibc's, whose command substitutions run in shells it starts with its own spawn, unprepared: they run in the kernel's working directory, not the image's, and an inherited descriptor of the image is a placeholder (\$(cat f) gives nothing)|test exec wordexp_substitutes_commands_in_the_image"
    "popen-child-unhanded|crates/hashfs-interpose/src/entry/program.rs|popen's ticket is never handed to the child it started (its pid, the one new among the thread's children, is not looked for): the ticket names the parent, so the shell takes nothing from it, and the count stays until the parent has ended (the last to leave finds a program on its way and leaves the image unclean)|test exec a_program_execd_without_the_shim_leaves_the_image_clean"
    "popen-unticketed|crates/hashfs-interpose/src/entry/program.rs|popen takes no ticket and looks for no pid, as before 2026-12-07: a shell it started that never joins (no LD_PRELOAD) stays counted (the last to leave finds a program on its way and leaves the image unclean)|test exec a_program_execd_without_the_shim_leaves_the_image_clean"
    "umask-not-followed|crates/hashfs-interpose/src/entry/process.rs|the shim keeps the file-mode creation mask it read at its first create, and a program's later umask() does not change it (its files keep the old mask's permissions)|test umask files_get_the_programs_umask_in_the_image_and_beside_it"
    "path-search-unserved|crates/hashfs-interpose/src/entry/search.rs|execvp and posix_spawnp leave the PATH search to libc, whose execve the shim does not see: a program in the image on PATH is not found (env, xargs), or one of the same name further down the path runs instead|test exec programs_in_the_image_are_found_on_path"
    "kernel-dir-walk-unserved|crates/hashfs-preload/src/shim/path.rs|a name under a kernel directory's descriptor that leads into the prefix (a walk from a descriptor of /, as rsync's receiver makes) reaches the kernel, which has no such file: every rsync into the image fails|test apps rsync_and_walks_from_a_descriptor_of_the_root"
    "dir-stream-without-descriptor|crates/hashfs-preload/src/shim/dir.rs|a directory stream of the image that opendir made has no descriptor (dirfd gives -1): perl's in-place edit fails to rename its work file over the file (EBADF) and leaves it|test apps perl_edits_files_in_place"
    "pump-thread-holds-its-file|crates/hashfs-preload/src/shim/pump.rs|a pump's thread holds its file by a reference of its own, which every forked child copies without the thread: a subshell of a shell whose output goes to a file in the image cannot leave the image at its exit (a message per subshell, its slot left to be reaped)|test forks subshells_of_a_redirected_shell_leave_the_image"
    "standard-sync-to-kernel|crates/hashfs-interpose/src/entry/io.rs|fsync of a standard descriptor reaches the kernel, whatever the shim made of it: dd's conv=fsync on its output in the image (a pipe the shim pumps) fails with EINVAL|test apps syncs_of_redirected_output_and_of_the_image"
    "dot-dot-out-unserved|crates/hashfs-preload/src/shim/path.rs|a path that leaves the image through .. reaches the kernel as the caller wrote it: from a working directory inside the image, .. is the kernel's placeholder's parent (ls .. at the image's root lists /tmp), and /pm/.. is not found|test apps paths_out_of_the_image_through_dot_dot_reach_the_kernels_files"
    "realpath-unserved|crates/hashfs-interpose/src/entry/realpath.rs|realpath and canonicalize_file_name are libc's, which resolve with glibc's own lstat and readlink: every path in the image fails with ENOENT (cargo cannot build a crate there)|test apps realpath_resolves_paths_in_the_image"
    "spawn-chdir-to-kernel|crates/hashfs-interpose/src/entry/spawn_dir.rs|a spawn's change of directory (posix_spawn_file_actions_addchdir_np) into the image is left to the kernel's child, which cannot make it: the spawn fails with ENOENT (Rust's Command::current_dir; cargo test in the image)|test exec a_spawn_changes_into_a_directory_of_the_image"
    "hole-fault-after-fill-denied|crates/hashfs/src/pm/holefault.rs|a write fault on a hole page that another fault filled meanwhile (its watch gone) is denied: an inaccessible page replaces the file's block and the writer dies with SIGSEGV (rust-lld writing its output from several threads)|unit pm::holefault::tests::a_fault_on_a_page_another_fault_filled_retries_on_the_file"
    "walk-dotdot-relocks|crates/hashfs/src/fs/api.rs|a walk takes the image lock for a symbolic link target's \"..\" under the read side its resolution holds, and waits for its own reader for ever (find -L through the shim hung)|test shared_mount a_link_up_and_over_resolves_on_a_shared_mount"
    "link-prefix-kept|crates/hashfs/src/fs/api.rs|a walk under a mount point (the shim's prefix) takes an absolute symbolic link's target as a path inside the file system, prefix and all (a link to /pm/x is not found; one out of the image finds a file of the same path inside)|test posix_semantics absolute_links_under_a_mount_point_stay_inside_and_others_lead_out"
    "dlopen-called-not-jumped|crates/hashfs-interpose/src/export.rs|the exported dlopen calls libc's instead of jumping to it: libc takes the shim for its caller and searches a bare name along the shim's RUNPATH, not the program's (a plugin found by the program's RUNPATH is not found)|test libraries libraries_in_the_image_load_with_dlopen"
    "dlopen-deps-not-first|crates/hashfs-interpose/src/entry/library.rs|the libraries in the image that a library in the image needs are not loaded before it: the loader looks for them on disk, where the kernel cannot see the image, and the load fails|test libraries libraries_in_the_image_load_with_dlopen"
    "dlopen-deps-held|crates/hashfs-interpose/src/entry/library.rs|the interposer keeps its own hold on the dependencies it loaded first: a library closed and loaded again after a dependency was rebuilt still gets the old one|test libraries libraries_in_the_image_load_with_dlopen"
    "fifo-open-unserved|crates/hashfs-preload/src/shim/fd.rs|an open of a FIFO made in the image is refused by the shim (the kernel cannot see the image, so nothing else can open it): mkfifo in the image makes a FIFO no one can use|test apps fifos_in_the_image_carry_bytes_between_processes"
    "fifo-node-kept|crates/hashfs-preload/src/shim/names.rs|a FIFO unlinked through the shim leaves the kernel FIFO that stood for it (and its directory) beside the region for ever|test apps fifos_in_the_image_carry_bytes_between_processes"
    "fifo-dir-with-region|crates/hashfs/src/share/attach.rs|the kernel FIFOs of an image go with its region, though a process that left the image may still hold one open (a shell's cmd < fifo): the next writer makes a new FIFO and waits for a reader that never comes|test apps fifos_in_the_image_carry_bytes_between_processes"
    "dot-dot-out-names-unserved|crates/hashfs-preload/src/shim/names.rs|mkdir, unlink, rmdir, symlink and truncate of a path that leaves the image through .. reach the kernel as written, against its placeholder working directory (mkdir ../x from the image's root fails, or makes x beside the placeholder)|test apps paths_out_of_the_image_through_dot_dot_reach_the_kernels_files"
    "dot-dot-out-attrs-unserved|crates/hashfs-preload/src/shim/meta.rs|chmod of a path that leaves the image through .. reaches the kernel as written, against its placeholder working directory (ENOENT, or another file's mode changed)|test apps paths_out_of_the_image_through_dot_dot_reach_the_kernels_files"
    "spawn-fchdir-to-kernel|crates/hashfs-interpose/src/entry/spawn_dir.rs|a spawn's change of directory by a descriptor of the image (posix_spawn_file_actions_addfchdir_np) is left to the kernel's child, which changes into the descriptor's placeholder: the spawn fails with ENOTDIR|test exec a_spawn_changes_into_a_directory_of_the_image"
    "linked-libraries-unserved|crates/hashfs-preload/src/shim/library.rs|a program in the image that needs libraries in the image at start is run without them: the loader, which cannot see the image, fails (cannot open shared object file)|test libraries programs_in_the_image_start_with_their_libraries_from_it"
    "linked-path-kept|crates/hashfs-interpose/src/entry/linked.rs|a program started with a directory of links to its libraries keeps that directory as its LD_LIBRARY_PATH (the path its caller gave is lost, or an unset one becomes set)|test libraries programs_in_the_image_start_with_their_libraries_from_it"
    "linked-links-left|crates/hashfs-interpose/src/entry/linked.rs|a program started with a directory of links to its libraries leaves the directory in /dev/shm (one for every such exec)|test libraries programs_in_the_image_start_with_their_libraries_from_it"
    "zombie-leader-dead|crates/hashfs/src/share/participants.rs|a process whose main thread is a zombie is taken for dead though another of its threads runs, as while a thread other than the main one runs execve: a writer handing descriptions over to the program it execs is seen dead in that window (a read-only participant opening then is refused)|unit share::participants::tests::a_process_runs_while_a_thread_outlives_its_main_one"
    "passed-cwd-above-limit|crates/hashfs-preload/src/shim/exec.rs|the memfd passing the working directory inside the image to an exec'd program is moved to descriptor 900 or not passed at all: under a lower descriptor limit the program starts outside its working directory (pwd fails)|test libraries programs_in_the_image_start_with_their_libraries_from_it"
    "fifo-dir-by-reader|crates/hashfs-preload/src/shim/fifo.rs|a process that may only read the image makes the image's FIFO directory, its own user's: the writers then refuse it, and no process of the image can open a FIFO|test apps fifos_in_the_image_carry_bytes_between_processes"
    "fifo-node-race|crates/hashfs-preload/src/shim/fifo.rs|processes opening a new FIFO at once each try to make its kernel FIFO, and those that find it made by another fail (EEXIST) instead of opening it|test apps fifos_in_the_image_carry_bytes_between_processes"
    "fifo-dir-trusted-by-name|crates/hashfs-preload/src/shim/fifo.rs|a process trusts the image's FIFO directory by its name once it has checked it: a directory made again there by a user who may not write the image (after the last FIFO's went) gets the next FIFO's kernel node, whose bytes that user can read|test apps fifos_in_the_image_carry_bytes_between_processes"
    "exec-image-unserved|crates/hashfs-preload/src/shim/cwd.rs|an exec or spawn of a program file in the image goes to the kernel, which cannot see the image (ENOENT: a program built in the image, or a script there, does not run)|test exec programs_and_scripts_in_the_image_run"
    "vfork-kept-with-descriptors|crates/hashfs-preload/src/shim/cwd.rs|a vfork whose child inherits HashFS descriptors stays a vfork (its exec, in its parent's memory, hands nothing over)|test exec the_variadic_execs_hand_descriptors_over"
    "rename-source-looked-up-early|crates/hashfs/src/fs/rename.rs|a rename looks its source entry up under a read lock before it write-locks the directories (an unlink between the two leaves it moving a removed entry)|unit a_rename_finds_its_source_under_the_directories_locks"
    "read-after-unlock|crates/hashfs/src/fs/data.rs|a read copies the file's blocks after it lets the file's lock go (a truncation frees them under it, another file takes them)|test races reads_racing_truncations_see_only_the_files_bytes"
    "leave-clears-leaving-mark|crates/hashfs/src/share/participants.rs|a participant giving its slot back clears its leaving mark before its pid: in between it counts as staying, so the last two processes to leave can each count the other as staying and neither marks the image clean|unit share::participants::tests::a_slot_given_back_never_counts_as_staying_again"
    "join-keeps-leaving-mark|crates/hashfs/src/share/participants.rs|a participant taking a slot given back keeps its leaving mark: it never counts as staying, so another that leaves before it marks the image clean under it|unit share::participants::tests::a_slot_given_back_never_counts_as_staying_again"
    "liveness-lock-of-description|crates/hashfs/src/share/liveness.rs|a participant's liveness lock is a lock of its open file description (OFD), which names no pid, not a POSIX lock of its process: a child that inherited the region's descriptor keeps it, so a participant killed while a child it forked without the library runs is taken for alive (never reaped; the last to leave leaves the image unclean)|test shared_liveness a_participant_killed_while_a_child_it_forked_runs_is_found_dead"
    "liveness-holder-unchecked|crates/hashfs/src/share/liveness.rs|a slot counts as alive when any process holds the lock on its byte, not only the pid the slot names: a dead participant's slot whose byte another process holds is taken for alive|unit share::liveness::tests::a_slot_is_alive_by_its_lock_only_when_the_slots_process_holds_it"
    "liveness-read-lock-counts|crates/hashfs/src/share/liveness.rs|a read lock on a slot's byte counts as its process's liveness lock: a process that may only read the region (and took a dead participant's pid) makes that participant's slot count as alive|unit share::liveness::tests::a_slot_is_alive_by_its_lock_only_when_the_slots_process_holds_it"
    "liveness-kept-at-leave|crates/hashfs/src/share/participants.rs|a participant gives its slot back still holding the lock on the slot's byte: the next process to take the slot cannot take it, and is asked of /proc for as long as it lives|unit share::liveness::tests::a_slot_is_alive_by_its_lock_only_when_the_slots_process_holds_it"
    "liveness-join-takes-no-lock|crates/hashfs/src/share/participants.rs|a joining participant takes no lock on its slot's byte: the others ask /proc whether it runs at every join and leave|unit share::liveness::tests::a_slot_is_alive_by_its_lock_only_when_the_slots_process_holds_it"
    "liveness-child-takes-no-lock|crates/hashfs/src/fs/shared/fork.rs|a forked child that takes the slot its parent reserved takes no lock on the slot's byte (the parent's lock is not inherited): the others ask /proc whether it runs at every join and leave|test shared_liveness a_participant_killed_while_a_child_it_forked_runs_is_found_dead"
    "takeover-attributes-bit-kept|crates/hashfs/src/fs/shared/takeover.rs|a survivor that finishes a dead participant's free of a file with attributes frees the attributes' inode with it but leaves its bit taken in the region's inode bitmap|test crash_consistency process_deaths_in_frees_of_files_with_attributes"
    "lock-release-relaxed|crates/hashfs/src/share/lock.rs|the robust lock is let go with a relaxed store (the next owner's section is not ordered after this one's writes)|test lock_model two_participants_exclude_each_other"
    "takeover-without-cas|crates/hashfs/src/share/lock.rs|a waiter that finds the owner dead takes the lock with a plain swap, not a compare-and-swap (two waiters both take it over)|test lock_model a_dead_owners_lock_is_taken_over_once"
    "exec-descriptor-unnamed|crates/hashfs-preload/src/shim/exec.rs|an exec leaves a surviving descriptor's placeholder unnamed (the exec'd program cannot tell which open file it is)|test exec an_execd_program_inherits_a_descriptor_and_its_offset"
    "exec-input-unread-lost|crates/hashfs-preload/src/shim/exec.rs|an exec drops the bytes an input pump put in the pipe that the program had not read (they are skipped: cat after a partial read starts at the end)|test exec an_execd_program_inherits_a_descriptor_and_its_offset"
    "shared-depth-in-thread-storage|crates/hashfs/src/fs/shared/mod.rs|a thread's depth in calls is kept where the thread's storage teardown loses it (a program's atexit handler, run after it, takes the image lock again inside its own call and waits forever)|test processes a_programs_atexit_handler_still_has_the_image"
    "spawn-system-unprepared|crates/hashfs-interpose/src/export.rs|system and popen reach glibc without the shim's preparation (their sh -c starts outside the working directory inside the image)|test exec system_and_popen_run_commands_in_the_working_directory_inside_the_image"
    "shared-clean-with-orphans|crates/hashfs/src/fs/shared/mod.rs|the last participant to leave marks the image clean with unlinked inodes still in it (a killed holder's bit kept them; the next mount refuses the image)|test shared_mount the_last_to_leave_frees_what_a_killed_holder_kept"
    "shim-image-fd-low|crates/hashfs/src/pm/mmap.rs|the image's descriptor stays at the low number open gave it (a shell's exec 3>file replaces it and drops the image's lock)|test forks a_subshell_writes_through_a_descriptor_of_the_shell"
    "shim-locks-always-succeed|crates/hashfs-preload/src/shim/locks.rs|the shim grants every record lock at once, as when one process owned the image (two SQLite writers both take the database)|test processes sqlite_with_two_writer_processes_loses_no_row"
    "shared-description-cleared|crates/hashfs-preload/src/shim/locks.rs|a description a forked child still holds has its OFD locks and flock dropped at the parent's close (the child's flock goes)|test record_locks posix_locks_outlive_the_processs_flock_and_ofd_locks_on_other_files"
    "kept-descriptor-closed|crates/hashfs-preload/src/shim/fd.rs|a program's close of the shim's descriptor of the image closes it (a daemon closing every descriptor from 3 up leaves a ctFS view mapping the image through a closed number: EBADF)|test exec closing_or_replacing_the_shims_image_descriptor_leaves_the_image_whole"
    "kept-descriptor-closed-in-range|crates/hashfs-preload/src/shim/fd.rs|a program's close_range over the shim's descriptor of the image closes it|test exec closing_or_replacing_the_shims_image_descriptor_leaves_the_image_whole"
    "kept-descriptor-replaced|crates/hashfs-preload/src/shim/fd.rs|a program's dup2 onto the shim's descriptor of the image replaces it (a ctFS view then maps the program's file: SIGBUS past its end, its bytes within it)|test exec closing_or_replacing_the_shims_image_descriptor_leaves_the_image_whole"
    "posix-close-keeps-locks|crates/hashfs-preload/src/shim/locks.rs|a close of a descriptor of a file leaves the process's POSIX locks on it held|test record_locks record_locks_and_flock_exclude_another_process"
    "lock-table-owner-blind|crates/hashfs/src/share/lock_table.rs|the table of record locks takes an owner's own lock for a conflict (a read lock turned into a write lock is refused)|unit share::lock_table::tests::owners_share_reads_and_exclude_writes_and_flocks_are_apart"
    "lock-table-unlocked|crates/hashfs/src/share/lock_table.rs|the table of record locks is changed without its lock (two participants each find no conflict and both take one write lock)|unit share::lock_table::tests::threads_taking_one_write_lock_never_hold_it_together"
    "lock-table-gone-kept|crates/hashfs/src/share/lock_table.rs|a lock whose owner is gone (its process killed) stays in the way (a waiter for a killed holder's lock waits for ever)|test record_locks a_killed_holders_lock_goes_to_the_waiter_and_then_the_next"
    "lock-table-split-drops|crates/hashfs/src/share/lock_table.rs|an unlock or a lock of another type inside an owner's range drops the range's part before it|unit share::lock_table::tests::locks_follow_a_model_of_every_byte"
    "lock-table-merges-types|crates/hashfs/src/share/lock_table.rs|a lock merges with the owner's touching ranges of the other type (a write lock becomes a read lock beside a new read lock)|unit share::lock_table::tests::locks_follow_a_model_of_every_byte"
    "lock-table-removes-first|crates/hashfs/src/share/lock_table.rs|a change of an owner's locks frees the entries it replaces before it writes the new ones (a holder killed between leaves a description a forked process holds with less than it held before and after)|unit share::lock_table::tests::a_change_cut_after_any_store_keeps_what_it_held_before_and_after"
    "lock-table-no-cycle-check|crates/hashfs/src/share/lock_table.rs|a POSIX waiter whose wait closes a cycle of waiters sleeps instead of being told EDEADLK (both wait for ever)|test record_locks a_wait_that_closes_a_cycle_between_processes_is_refused"
    "lock-table-restart-ignored|crates/hashfs/src/share/lock_table.rs|a wait interrupted by a signal ends with EINTR also after a handler installed with SA_RESTART|test record_locks a_signal_ends_a_wait_as_linux_ends_it"
    "read-only-lock-unprobed|crates/hashfs/src/share/lock_table.rs|a writer's write lock is granted without asking the kernel for a read-only participant's read lock over its bytes (both hold them)|unit fs::shared::record_locks::tests::a_readers_read_lock_and_a_writers_write_lock_exclude_each_other"
    "read-only-lock-unlooked|crates/hashfs/src/fs/shared/record_locks.rs|a read-only participant's read lock is granted without a look at the region's table for a writer's write lock (both hold them)|unit fs::shared::record_locks::tests::a_readers_read_lock_and_a_writers_write_lock_exclude_each_other"
    "read-only-lock-probed-first|crates/hashfs/src/share/lock_table.rs|a writer asks the kernel for readers' locks before its entries are written, so a reader between the two finds neither (both granted)|unit fs::shared::record_locks::tests::each_side_announces_before_it_looks"
    "read-only-lock-looked-first|crates/hashfs/src/fs/shared/record_locks.rs|a read-only participant looks at the table before its kernel lock is taken, so a writer between the two finds neither (both granted)|unit fs::shared::record_locks::tests::each_side_announces_before_it_looks"
    "read-only-lock-presence-trusted|crates/hashfs/src/share/read_only_locks.rs|a writer trusts an answer that no reader is marked at any age, so a reader that marked itself after it and waited is not asked about (both granted)|unit fs::shared::record_locks::tests::a_reader_that_comes_after_a_writers_answer_is_seen"
    "read-only-lock-unsettled|crates/hashfs/src/share/read_only_locks.rs|a read-only participant locks at once after marking itself, inside the time a writer trusts an answer given before the mark (both granted)|unit fs::shared::record_locks::tests::a_reader_that_comes_after_a_writers_answer_is_seen"
    "read-only-lock-kept-on-refusal|crates/hashfs/src/share/lock_table.rs|a writer refused because of a reader's lock leaves its entries in the table (a lock it was refused keeps others out)|unit fs::shared::record_locks::tests::a_refused_write_lock_leaves_the_table_as_it_was"
    "read-only-unlock-drops-others|crates/hashfs/src/share/read_only_locks.rs|a read-only participant's unlock lets the kernel go of the whole range, also what its other owners still hold (a writer then takes bytes a reader holds)|unit fs::shared::record_locks::tests::a_readers_unlock_keeps_what_its_other_owners_hold"
    "freopen-mode-kept|crates/hashfs-interpose/src/entry/compose.rs|freopen of a shim stream keeps the stream's old mode (a stream written and reopened for reading reads nothing)|test call_answers libc_functions_built_on_internal_calls_answer_as_the_kernels"
    "lockf-unserved|crates/hashfs-interpose/src/entry/fd.rs|lockf on a HashFS descriptor goes to glibc, whose internal fcntl reaches the placeholder (EBADF)|test record_locks lockf_locks_exclude_another_process"
    "loader-unserved|crates/hashfs-interpose/src/entry/loader.rs|ld.so, ldd and valgrind are given a program of the image by its path, which they open with their own system calls (not found)|test libraries ldd_ld_so_and_valgrind_load_programs_of_the_image"
    "bare-name-in-image-unserved|crates/hashfs-interpose/src/entry/library.rs|dlopen of a bare name that a directory of the image in LD_LIBRARY_PATH holds goes to the loader, which cannot open it (not found)|test libraries a_bare_name_loads_from_a_directory_of_the_image_in_ld_library_path"
    "kernel-program-libraries-unserved|crates/hashfs-preload/src/shim/library.rs|a program of the kernel's started with LD_LIBRARY_PATH into the image gets none of the image's libraries (the loader cannot open them)|test libraries a_program_of_the_kernels_starts_with_libraries_of_the_image"
    "soname-not-given|crates/hashfs-preload/src/shim/library.rs|a dependency in the image without a DT_SONAME keeps its copy as it is: the loader, given it first, does not take it for the DT_NEEDED name and looks on disk (the dlopen fails)|test libraries a_dependency_without_a_soname_loads_with_dlopen"
    "repair-keeps-table-strays|crates/hashfs/src/fs/blocks/fsck.rs|fsck does not report a global table's entries that no lookup or removal treats as whole (a key changed in place survives a repair that marks the image clean; the next mount refuses it)|test fuzz_images a_misplaced_extent_hash_entry_is_cleared_by_repair"
    "stray-reach-unchecked|crates/hashfs/src/mapping/extent_hash.rs|fsck takes every extent-hash entry as reachable from its key (a removal would not find one its probe path misses)|unit stray_entries_are_what_lookups_and_removals_cannot_treat_as_whole"
    "tag-size-32-bits|crates/hashfs/src/fs/hashfs/append_tag.rs|a one-fence append's tagged size is read back in 32 bits (recovery of an append to a file past 4 GiB settles a size 4 GiB short)|test crash_consistency explore_largest_sizes"
    "regions-full-chain-no-open|crates/hashfs/src/fs/hashfs/regions.rs|a write whose key finds its chain full in the regions placement opens groups only if the load of all open groups is past the target (concurrent writers fill the newest groups and get ENOSPC on an image a third full)|test regions_placement threads_writing_small_files_while_groups_open"
    "pump-attributes-unclaimed|crates/hashfs-preload/src/shim.rs|the shim does not claim a standard descriptor that a pump feeds from a file for the calls on the file (touch's futimens on its reopened standard input reaches the kernel's pipe and succeeds there)|test apps touch_sets_the_times_it_is_given"
    "mkstemp-uninterposed|crates/hashfs-interpose/src/export.rs|mkstemp and its kin are not interposed: glibc creates the file with its internal open, which reaches the kernel (git cannot init a repository inside the image)|test apps git_and_mktemp_inside_the_image"
    "double-free-into-index|crates/hashfs/src/mapping/mod.rs|a change gives back to the allocator every block it frees, also one whose bitmap bit was already clear (a damaged image's file that maps a free block puts it in the free-run index twice; the next allocation panics)|test fuzz_images a_block_freed_twice_goes_back_to_the_allocator_once"
    "read-side-no-drain|crates/hashfs/src/share/image.rs|a participant that takes the image lock does not wait for the participants inside read-side calls (a truncation frees blocks under another participant's read)|test shared_read_side reads_beside_a_truncating_writer_see_whole_generations"
    "overwrite-without-inode-lock|crates/hashfs/src/fs/shared/read_side.rs|a read-side overwrite does not take the inode's lock in the region (two participants' overwrites of one file interleave)|test shared_read_side overwrites_of_one_file_from_two_participants_take_turns"
    "dead-reader-waited-for|crates/hashfs/src/share/readers.rs|a participant taking the image lock waits for a dead participant's count of read-side calls instead of clearing it|test shared_read_side a_participant_killed_inside_an_overwrite_holds_no_one_up"
    "read-side-fence-dropped|crates/hashfs/src/share/readers.rs|a reader entering the read side looks at the image lock's word without a fence after its count (its count and a writer's lock can each miss the other)|test lock_model a_reader_and_a_writer_never_overlap"
    "mount-locks-local|crates/hashfs-cli/src/mountcmd.rs|a shared mount leaves record locks to the kernel's own, local to the mount (a lock through the mount and one through the shim both succeed on one range)|test fuse_shared record_locks_through_the_mount_and_the_shim_exclude_each_other"
    "mount-flock-local|crates/hashfs-fuse/src/lib.rs|a shared mount does not ask for FUSE_FLOCK_LOCKS, so the kernel keeps flock local to the mount (a flock through it does not exclude the shim's)|test fuse_shared flock_through_the_mount_and_the_shim_exclude_each_other"
    "mount-flock-kept-at-release|crates/hashfs-fuse/src/lib.rs|a shared mount keeps a file's flock after its release (the holder closed its file and the shim is still refused)|test fuse_shared flock_through_the_mount_and_the_shim_exclude_each_other"
    "mount-close-keeps-locks|crates/hashfs-fuse/src/locks.rs|a close through a shared mount (FUSE's flush) does not drop the closer's record locks (a holder that closed its file still holds its lock in the table)|test fuse_shared record_locks_through_the_mount_and_the_shim_exclude_each_other"
    "mount-watch-off|crates/hashfs-cli/src/mountcmd.rs|a shared mount does not watch the ring of changes (the kernel keeps the pages a mapping through the mount faulted in before a shim process's change, with no bound)|test fuse_shared an_existing_mapping_through_the_mount_sees_a_change_soon"
    "read-side-overwrite-unnoted|crates/hashfs/src/fs/shared/read_side.rs|an overwrite on the read side is not noted in the ring of data changes (a mapping through a shared mount keeps the page from before it)|test shared_read_side every_overwrite_in_place_is_noted_for_a_watcher"
    "data-ring-untagged|crates/hashfs/src/share/data_ring.rs|a reader of the ring of data changes takes every slot up to the head, also one claimed and not yet written (it reads an old inode there and misses the overwrite)|unit a_claimed_unwritten_slot_stops_the_reader_until_half_a_ring_passes_it"
    "create-lost-not-retried|crates/hashfs/src/fs/api.rs|an open with O_CREAT fails with EEXIST when it found the name free and another thread or process made it before its create (the shim's open did: SQLite then opens its files read-only)|unit a_create_that_loses_the_name_to_another_opens_what_the_other_made"
    "mount-rename-unlocked|crates/hashfs/src/fs/api.rs|a rename by inode (the mount's) runs without the image lock: it neither waits for the other participants nor publishes what it changed (a shim process keeps its old view of the names)|test fuse_shared saves_on_either_side_are_read_whole_on_the_other"
    "mount-node-id-is-ino|crates/hashfs-fuse/src/nodes.rs|the mount gives the kernel inode numbers as node IDs (a directory another participant removed, whose number a new directory took, lists the new one's names through the kernel's old inode)|test fuse_shared a_removed_directory_never_turns_into_the_one_that_takes_its_number"
    "mount-lookup-not-kept|crates/hashfs-fuse/src/lib.rs|a shared mount's lookup does not keep the regular file it finds open for the kernel's open that follows (another participant's rename over the name frees it between the two, and the open fails with ESTALE)|test fuse_shared a_name_saved_over_again_and_again_reads_through_the_mount_every_time"
    "inode-bits-own|crates/hashfs/src/fs/shared/mod.rs|every participant allocates inodes from a bitmap of its own, read from the inode table as it joins (as before the region held one), which no one tells of what the others make after that|unit a_file_made_while_a_participant_joins_is_seen_by_it"
    "read-only-unvalidated|crates/hashfs/src/fs/shared/read_only.rs|a read-only participant trusts a call's first pass though a participant held the image lock while it ran (a file rewritten meanwhile reads as its new bytes cut to its old size)|unit a_read_beside_a_change_is_read_again"
    "read-only-sequence-still|crates/hashfs/src/share/sequence.rs|the image lock's holder leaves the lock's sequence as it was, so a read-only participant never sees that a change ran beside its call|unit a_read_beside_a_change_is_read_again"
    "read-only-pin-ignored|crates/hashfs/src/fs/shared/mod.rs|a writer frees an unlinked file that a read-only participant has open (pinned), whose blocks another file then takes|unit a_file_a_read_only_participant_has_open_stays_until_it_closes"
    "read-only-orphan-kept|crates/hashfs/src/fs/shared/mod.rs|a writer never frees the unlinked files it kept for a read-only participant once that one lets go (they pile up until the last participant leaves)|unit a_file_a_read_only_participant_has_open_stays_until_it_closes"
    "sequence-release-relaxed|crates/hashfs/src/share/sequence.rs|the image lock's holder makes the sequence even with a relaxed store (a read-only reader may see it even before the holder's writes)|test lock_model a_read_the_sequence_accepts_is_never_torn"
    "read-only-open-split|crates/hashfs/src/fs/api.rs|a read-only participant resolves a name and finds its inode in two calls, so a writer can free the inode between them and make another file of it (the reader opens that file under the name)|unit an_open_beside_a_rename_opens_a_file_the_name_had"
    "read-only-pin-unchecked|crates/hashfs/src/fs/api.rs|a read-only participant's open does not ask again, once its pin is taken, whether the inode still has the generation it found (a writer that freed the inode meanwhile and made a new file of it: the reader opens that file under the old name)|unit an_open_whose_inode_is_freed_before_its_pin_opens_the_name_again"
    "open-stale-not-retried|crates/hashfs/src/fs/api.rs|an open whose inode was freed before it was opened (a rename over the name by another thread or process) fails with ESTALE instead of resolving the name again|unit an_open_whose_inode_is_freed_before_its_pin_opens_the_name_again"
    "unmap-record-after-pages|crates/hashfs-preload/src/shim/mmap.rs|munmap (and a MAP_FIXED mapping over a mapping of the shim's) drops the record after the kernel's call, not under the records' lock held across it: the follower thread, refreshing a copy meanwhile, writes into pages already unmapped (SIGSEGV) or into the mapping made next at that address|test map_copy a_copy_unmapped_while_the_follower_refreshes_it_takes_its_record_with_it"
    "library-opened-unheld|crates/hashfs-preload/src/shim/library.rs|dlopen of a library in the image resolves its name, reads its attributes and opens its inode in separate calls, not under one hold of the image: another process's rename of a new build over it frees the inode between them (the load fails, ESTALE)|test libraries a_library_renamed_over_in_one_process_always_loads_in_another"
    "mapped-mark-outlives-death|crates/hashfs/src/share/image.rs|a dead participant's marks of its mappings stay in the open-inode table: a file it mapped counts as mapped writable (no other process serves a mapping of it by a copy) and its blocks as pinned (no other process may shrink it) for good|unit a_mark_is_the_holders_and_dies_with_it"
    "writable-mark-unpublished|crates/hashfs/src/fs/shared/mapped.rs|a participant's mark of a file it maps writable and shared is stored but not published in the ring of changes: another process's copy of the file, made before, is never given back and misses every store through the mapping|test map_copy a_file_mapped_writable_by_another_process_is_never_a_copy_there"
    "writable-unmark-unpublished|crates/hashfs/src/fs/shared/mapped.rs|the end of a participant's mark of a file it mapped writable is not published: a mount beside stops dropping its kernel's pages of the file without a last drop after the last stores, and a mapping through it keeps bytes older than them|test fuse_shared a_mapping_through_the_mount_sees_stores_through_a_shim_processs_mapping"
    "mount-ignores-marks|crates/hashfs-fuse/src/watch.rs|a mount beside the shim does not drop its kernel's pages of a file a shim process maps writable and shared: a mapping through the mount misses every store through the shim's mapping|test fuse_shared a_mapping_through_the_mount_sees_stores_through_a_shim_processs_mapping"
    "follower-keeps-copies|crates/hashfs-preload/src/shim/mmap/follow.rs|the mapping follower does not give a copy back to the file's pages when another process marks the file mapped writable: the copy misses every store through that mapping|test map_copy a_file_mapped_writable_by_another_process_is_never_a_copy_there"
    "copy-recorded-unasked|crates/hashfs-preload/src/shim/mmap.rs|a mapping served by a copy is recorded without asking whether another process maps the file writable (a mark published before the copy was made, read by the follower before the record was there, is never followed): the copy misses the stores through that mapping|test map_copy a_file_mapped_writable_by_another_process_is_never_a_copy_there"
    "mprotect-writable-unmarked|crates/hashfs-preload/src/shim/mmap.rs|a shared mapping made writable by mprotect is left recorded read-only: the file is not marked for the other processes, whose copies of it miss the stores through it|test map_copy a_file_mapped_writable_by_another_process_is_never_a_copy_there"
    "mapped-mark-outlives-unmap|crates/hashfs-preload/src/shim/mmap.rs|a process's mark of a file it mapped writable stays after its last such mapping goes: the other processes serve no mapping of the file by a copy while it lives|test map_copy a_file_mapped_writable_by_another_process_is_never_a_copy_there"
    "fork-child-unmarked|crates/hashfs/src/fs/shared/fork.rs|a forked child does not mark under its own name, as it joins, the writable shared mappings it inherited: once its parent unmaps, another process serves the file by a copy that misses the child's stores|test map_copy a_file_mapped_writable_by_another_process_is_never_a_copy_there"
    "blocks-unmarked|crates/hashfs/src/fs/map.rs|a mapping of a file's blocks is counted only in its own process, not marked in the shared region: another process truncates the file and frees the blocks under the mapping, which then reads and writes the file that takes them|test processes a_file_mapped_in_one_process_keeps_its_blocks_in_every_other"
    "unpin-keeps-mark|crates/hashfs/src/fs/map.rs|a process's last unmap of a file leaves its mark of the file's blocks: no other process may shrink the file while the process lives|test processes a_file_mapped_in_one_process_keeps_its_blocks_in_every_other"
    "dead-pins-kept|crates/hashfs/src/fs/shared/mapped.rs|a killed process's mark of a file's blocks counts until it is reaped: the others may not shrink the file meanwhile|test processes a_file_mapped_in_one_process_keeps_its_blocks_in_every_other"
    "punch-frees-under-mapping|crates/hashfs/src/fs/file.rs|a hole punched in a file another process maps fails with EBUSY instead of being zeroed in place|test processes a_file_mapped_in_one_process_keeps_its_blocks_in_every_other"
    "fork-child-blocks-unmarked|crates/hashfs/src/fs/shared/fork.rs|a forked child does not mark the blocks of the files it inherited mapped: once its parent unmaps, another process frees them under the child's mapping|test processes a_file_mapped_in_one_process_keeps_its_blocks_in_every_other"
    "unpin-before-child-joins|crates/hashfs/src/fs/shared/mapped.rs|a parent that unmaps a file right after fork takes its mark of the blocks away before its child has joined and marked them under its own name: another process frees them meanwhile, under the child's mapping|test shared_fork_pins a_parent_unmapping_before_its_child_joined_keeps_the_blocks_for_it"
    "close-before-child-joins|crates/hashfs/src/fs/file.rs|a parent that closes a file right after fork lets go of its hold before its child has joined and held it under its own name: an unlinked file the child has open is freed under it|test shared_fork_closes what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs"
    "fork-not-noted-for-children|crates/hashfs/src/fs/shared/fork.rs|a fork is not noted as one whose child may not have joined: the parent's closes and unmaps right after it let go at once, under the child|test shared_fork_closes what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs"
    "kept-close-freed|crates/hashfs/src/fs/shared/mod.rs|a file the parent closed and keeps for a child on its way does not count as open elsewhere: the parent's own unlink of it frees it under the child|test shared_fork_closes what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs"
    "unmark-before-child-joins|crates/hashfs/src/fs/shared/mapped.rs|a parent that unmaps a writable shared mapping right after fork takes its writable mark away before its child has joined and marked the file: another process keeps a copy of the file while the child stores to it|test shared_fork_closes what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs"
    "kept-marks-never-go|crates/hashfs/src/fs/shared/for_children.rs|a writable mark kept for a child on its way never goes: other processes never again serve the file by a copy|test shared_fork_closes what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs"
    "adoption-uncounts-before-open|crates/hashfs/src/fs/shared/fork.rs|a program started by execve or posix_spawn stops counting as on its way when it adopts the descriptions handed to it, before it opens their files: a participant whose close of one comes in between (its last hold but the program's) no longer finds its description on the way, and frees an unlinked one before the program opens it|unit an_execd_programs_unlinked_file_outlives_a_close_before_its_open"
    "children-keep-everything|crates/hashfs/src/fs/shared/for_children.rs|a parent with a child on its way keeps every file it closes, not only those open at the fork: with a count that stays up (a child killed before it joined) it holds every file it ever closes, and frees no unlinked one, until it leaves|test shared_fork_closes what_a_parent_lets_go_of_before_its_child_joined_stays_the_childs"
    "dead-count-kept|crates/hashfs/src/fs/shared/mod.rs|the reaper of a dead participant's slot leaves the count it had in the image's forks word (a program exec'd without the shim that was handed descriptors, a child killed before it joined): the image is left unclean by the last to leave, and its region in /dev/shm|test exec a_program_execd_without_the_shim_leaves_the_image_clean"
    "leaver-ignores-counts|crates/hashfs/src/fs/shared/mod.rs|the last participant to leave takes a dead program's count in the forks word for a child on its way: the image is left unclean, and its region in /dev/shm|test exec a_program_execd_without_the_shim_leaves_the_image_clean"
    "successor-drops-count|crates/hashfs/src/fs/shared/join.rs|a program started by execve reaps the slot of the program its process was as any dead one's: the handover's count goes as it joins, before it opened the files handed over, and a parent that closed one lets go of it in between|unit fs::shared::join::tests::an_execd_program_carries_its_handover_count_until_it_opened_its_files"
    "reader-watch-unasked|crates/hashfs/src/fs/shared/mod.rs|a writer notes its overwrites in place in the ring of data changes only while the region names a watcher, not while a read-only participant's lock says it follows the ring: the reader's copies past the budget keep what was overwritten|test processes a_mapping_shows_what_another_process_writes"
    "reader-watch-trusted-long|crates/hashfs/src/fs/shared/read_only.rs|a writer keeps its first answer to whether a read-only participant follows the ring of data changes for good: a reader that marks itself later never has the writer's overwrites in place noted, and its copies past the budget keep what was overwritten|test processes a_mapping_shows_what_another_process_writes"
    "spawn-unreserved|crates/hashfs/src/share/participants.rs|a posix_spawn with descriptors handed over reserves no ticket: the program's slot is kept only once the spawn has returned, as before 2026-12-07 (a program that joined, opened its files, uncounted itself and left by then gets a counted slot after it, which its reaper uncounts a second time: another program on its way loses its count)|test shared_spawn a_program_that_left_before_its_spawn_returned_is_uncounted_once"
    "spawn-ticket-unhanded|crates/hashfs/src/fs/shared/fork.rs|a spawn's ticket is never handed to the program's pid: it names the parent, counted, until the parent leaves (a program that ended without joining stays counted all that time, and the parent, finding it on its way, leaves the image unclean)|test shared_spawn a_program_that_ended_before_its_spawn_returned_is_uncounted_by_a_reaper"
    "spawn-ticket-untaken|crates/hashfs/src/fs/shared/fork.rs|a spawned program that joined before its spawn returned does not take the ticket's count once it has opened its files: it counts as on its way until it leaves|test shared_spawn a_program_that_joined_before_its_spawn_returned_stops_counting_once_it_opened_its_files"
    "spawn-ticket-unchecked|crates/hashfs/src/fs/shared/fork.rs|a spawned program takes the count of the slot its ticket names without asking whether that slot names it: a ticket reaped and taken again meanwhile is another's, whose count it takes|test shared_spawn a_ticket_reaped_and_taken_again_is_not_the_programs"
    "carried-counts-merged|crates/hashfs/src/fs/shared/join.rs|a program started by execve that finds two counts of its process (its predecessor's and a spawn ticket handed to that one late) carries one on and leaves the other up for good|test shared_spawn a_program_that_execs_before_its_spawn_returned_passes_one_count_on"
    "system-ticket-kept|crates/hashfs/src/fs/shared/fork.rs|the ticket of a system call that returned goes without its count: the shell it started, which took nothing from a ticket naming its parent, stays counted (the last to leave finds a program on its way and leaves the image unclean)|test exec a_program_execd_without_the_shim_leaves_the_image_clean"
    "exit-pump-copies-open|crates/hashfs-preload/src/shim.rs|at exit the shim closes only the standard descriptor a pump was started for, not a copy of its pipe that 2>&1 made: the pump waits for an end of its pipe that the process itself holds, and every exec > f 2>&1 script hangs at exit|test exec a_background_subshell_writes_after_its_scripts_exit_or_exec"
    "exit-pump-detached-kept|crates/hashfs-preload/src/shim.rs|at exit the shim closes the pipes of output pumps still on their descriptors but not of those that went on without one: a pipeline's echo under exec > f 2>&1 (a forked child whose own pump was replaced by the pipeline's pipe on 1, its copy on 2 kept) waits a second at exit and leaves the image unclean, its message in the file|test exec a_background_subshell_writes_after_its_scripts_exit_or_exec"
    "child-writes-parents-pipe|crates/hashfs-preload/src/shim/fork.rs|a forked child writes into its parent's pump's pipe instead of a pump of its own: the parent's exit waits for the child's end (a background subshell holds a script for as long as it runs), and what the child's builtins write after the parent's exec is lost|test exec a_background_subshell_writes_after_its_scripts_exit_or_exec"
    "spawn-pumps-unnamed|crates/hashfs-preload/src/shim/exec.rs|a program posix_spawn starts is not told that its standard output is its parent's pump's pipe: it writes through the parent's thread, and the parent's exit waits for the program's end|test exec a_spawned_program_writes_after_its_parents_exit"
    "spawn-pump-pipe-unchecked|crates/hashfs-preload/src/shim/exec.rs|a spawned program puts its own pump on a standard descriptor its parent named as a pump's pipe without checking it still is: one the spawn's file actions replaced (a pipe the parent reads) is sent into the file|test exec a_spawned_program_writes_after_its_parents_exit"
    "child-keeps-input-pump-end|crates/hashfs-preload/src/shim/pump.rs|a forked child keeps its copy of its parent's input pump's end of the pipe, which it has no thread to write through: a program reading the pipe after the parent has gone waits for ever|test exec a_background_reader_of_the_scripts_input_ends_after_the_script"
    "socket-bind-refused|crates/hashfs-preload/src/shim/socket.rs|bind of a UNIX socket at a path in the image fails with EOPNOTSUPP, as before 2026-12-07 (a server whose socket lies in its data directory, or in a TMPDIR in the image, cannot start)|test call_answers unix_sockets_in_the_image_answer_as_the_kernels"
    "socket-node-unshared|crates/hashfs-preload/src/shim/socket.rs|the kernel node standing for a socket of the image is named after the process that computes it: a connect from another process than the binder's finds nothing there (ECONNREFUSED)|test call_answers unix_sockets_in_the_image_answer_as_the_kernels"
    "socket-failed-bind-named|crates/hashfs-preload/src/shim/socket.rs|a bind the kernel refuses (the socket is bound already) keeps the socket file it made in the image: the name is taken though nothing is bound there|test call_answers unix_sockets_in_the_image_answer_as_the_kernels"
    "socket-datagram-unserved|crates/hashfs-preload/src/shim/socket.rs|a datagram sent with sendto or sendmsg to a socket in the image goes to the kernel with the path as written, which it cannot find (ENOENT), or which, under a host directory of the prefix's name, is another socket|test call_answers unix_sockets_in_the_image_answer_as_the_kernels"
    "socket-nodes-kept|crates/hashfs/src/share/attach.rs|the region's removal keeps the nodes of the image's UNIX sockets beside it, and their directory: each image whose sockets were not unlinked leaves them in /dev/shm until reboot|unit a_regions_removal_takes_its_socket_nodes_and_keeps_its_fifos"
    "spawn-ticket-unnamed|crates/hashfs/src/share/descriptions.rs|the names of descriptors handed over by a spawn do not carry its ticket: the program uncounts itself and the ticket's reaper uncounts it again|unit a_handed_name_carries_the_description_and_the_ticket"
    "description-holds-nothing|crates/hashfs/src/fs/shared/mod.rs|the last close of an unlinked file frees it while a program exec'd with a descriptor of it holds it by the description alone (between its join, which let go of its predecessor's holds, and its open of the file): the program's open fails|unit an_execd_programs_unlinked_file_outlives_a_close_before_its_open"
    "dead-offset-lock-kept|crates/hashfs/src/fs/shared/mod.rs|the reaper of a dead participant's slot leaves the description offset locks it held (a pump thread that the process's own execve killed mid-write): the next participant to join takes the slot's index and owns the lock for good, and the exec'd program's next write through the description waits for ever|unit locks_held_by_a_program_gone_by_exec_are_free_for_its_successor"
    "dead-table-lock-kept|crates/hashfs/src/share/lock_table.rs|the reaper of a dead participant's slot leaves the record locks' table lock if it held it (a thread in fcntl when the process exec'd or was killed): the next participant to join takes the slot's index and owns the table for good, and every process's next record lock waits for ever|unit locks_held_by_a_program_gone_by_exec_are_free_for_its_successor"
    "dead-wait-note-kept|crates/hashfs/src/share/lock_table.rs|the reaper of a dead participant's slot leaves the note of what its waiter blocked in F_SETLKW waited for (a thread the process's own execve killed, whose owner, the process, lives on with its POSIX locks): the deadlock check follows it, and another owner's wait for a range the process holds fails with EDEADLK though it closes no cycle|unit locks_held_by_a_program_gone_by_exec_are_free_for_its_successor"
    "fork-slot-unreserved|crates/hashfs/src/fs/shared/fork.rs|a fork's child takes a slot only as it joins, and counts itself in the image's forks word from then: a child killed before that leaves the parent's count for good (the last to leave finds a child on its way, leaves the image unclean and its region behind) and the descriptions counted for it never freed|test shared_fork_killed a_child_killed_before_it_joined_leaves_no_count_behind"
    "fork-parent-adopts-nothing|crates/hashfs/src/fs/shared/fork.rs|the parent hands the slot it reserved over to its child without the descriptions counted for it: a child killed before it joined leaves their fork counts, and they are never freed|test shared_fork_killed a_child_killed_before_it_joined_leaves_no_count_behind"
    "reader-child-pins-after-fork|crates/hashfs/src/fs/shared/read_only.rs|a read-only participant's forked child pins its files itself after the fork: its parent's close right after the fork lets go of the only pin, and a writer frees an unlinked file under the child|test shared_fork_reader a_read_only_parent_closing_right_after_fork_leaves_its_child_the_file"
    "reader-blocks-unpinned|crates/hashfs/src/fs/shared/read_only.rs|a read-only participant's mapping of a file's blocks takes no pin on them: a writer truncates the file and frees them under the mapping, which then reads the file that takes them|test processes a_file_mapped_in_one_process_keeps_its_blocks_in_every_other"
    "writer-ignores-reader-pins|crates/hashfs/src/fs/shared/mapped.rs|a writer that would free or move a file's blocks asks only the writers' marks, not the read-only participants' pins: it frees them under a reader's mapping|test processes a_file_mapped_in_one_process_keeps_its_blocks_in_every_other"
    "self-mem-inherited|crates/hashfs-preload/src/shim/mmap/self_mem.rs|a forked child writes into its copies through the /proc/self/mem descriptor it inherited, which is its parent's memory: the parent's memory at the copy's address changes under it|test map_copy a_copy_takes_writes_through_this_processs_own_memory"
    "copy-keeps-pin|crates/hashfs-preload/src/shim/mmap/copy.rs|a mapping served by a copy keeps its pin on the file's blocks, which it does not map: another process may not shrink a file this one maps only as a copy (EBUSY)|test map_copy a_file_mapped_here_as_a_copy_may_be_shrunk_by_another_process"
    "own-lap-everything|crates/hashfs/src/fs/shared/mod.rs|a participant that fell a ring behind its own changes takes the lap for everything changed, though every position it missed was its own: the shim's mapping follower of a process that writes fast copies every copy again at each lap|test shared_read_side a_lap_of_a_participants_own_changes_is_nothing_to_it"
    "fork-maps-not-held|crates/hashfs-preload/src/shim/mmap.rs|a fork does not hold the records of mappings across it: a child forked while the follower thread refreshes a mapping inherits them locked by a thread it does not have, and waits for ever when it follows its mappings|test processes forks_while_the_follower_refreshes_a_copy_leave_no_child_waiting"
    "read-held-holds-nothing|crates/hashfs/src/fs/api.rs|a call by path that reads (the shim's stat) resolves the name and reads the inode without the read side of the image lock held across both, so another participant's rename over the name frees the inode between them (ESTALE, or another file's attributes once the number is reused)|test shared_mount a_rename_over_a_name_waits_for_a_call_that_resolved_it"
    "leaver-keeps-image-lock|crates/hashfs/src/fs/shared/mod.rs|a participant that leaves while others stay keeps its hold on the image until its process closes the descriptor, so the last to leave finds the image held and keeps the region (left in /dev/shm for good once the image is removed)|test shared_mount the_last_to_leave_removes_the_region_while_an_earlier_leaver_still_has_the_image_open"
    "read-only-leaves-handover|crates/hashfs/src/fs/shared/read_only.rs|a read-only participant that leaves last removes the region though a writer's exec handed descriptions over in it (the program it started, not yet joined, finds none of its descriptors)|test shared_mount an_exec_handover_outlasts_a_read_only_participant_leaving_last"
    "left-regions-kept|crates/hashfs/src/fs/shared/join.rs|an image's first participant leaves the regions of images whose processes were all killed, which no last participant removed: they stay in /dev/shm until reboot (a CI run left three)|test shared_mount a_region_its_participants_all_left_goes_with_the_next_region_made"
    "attach-ignores-sweep|crates/hashfs/src/share/attach.rs|an attach maps the region it opened without checking, under its lock, that the name still leads to it: a sweep that removed it meanwhile leaves the process on a region no one else finds (two regions of one image)|unit share::sweep::tests::an_attach_that_a_sweep_overtakes_maps_the_region_in_place"
    "sweep-takes-no-region-lock|crates/hashfs/src/share/sweep.rs|the sweep of left regions removes one without its exclusive lock, so a region that processes map (or one attaches to) goes from under them|unit share::sweep::tests::a_sweep_leaves_a_region_an_attach_holds"
    "sweep-ignores-handover|crates/hashfs/src/share/sweep.rs|the sweep of left regions removes one in which an exec handed descriptions over to a program not yet joined (it maps nothing in that window)|unit share::sweep::tests::a_region_goes_when_nothing_can_use_it_and_only_then"
    "sweep-keeps-dead-handover|crates/hashfs/src/share/sweep.rs|the sweep of left regions keeps every region whose handover count is not zero, also once no slot's process runs (no exec'd program can join any more): such a region stays in /dev/shm for good (one was found after a session's test runs)|unit share::sweep::tests::a_region_goes_when_nothing_can_use_it_and_only_then"
    "takeover-caches-kept|crates/hashfs/src/fs/shared/mod.rs|a participant that recovers the image after a dead one (a takeover, or a join that finds the lock's holder dead) tells no one to read it again (its own caches and the others' keep what the dead one's half-done call left, and what its recovery undid)|death create,mkdir,append"
    "made-without-record|crates/hashfs-spfs/src/absorb.rs|a file made in PM is promoted without its made record, so its fsyncs are absorbed while nothing can make it again if the lower file system loses its creation (a power failure then takes the file and every acknowledged byte)|stacked"
    "made-record-kept-at-unlink|crates/hashfs-spfs/src/file.rs|a file made in PM keeps its made record when its last name is removed through the front end, so a mount after a crash that freed its inode makes the deleted file again|test fuse_stacked a_file_made_in_pm_is_made_again_when_the_lower_file_system_loses_its_creation"
    "remake-over-another-file|crates/hashfs-spfs/src/remake.rs|a mount that makes again a file whose creation the lower file system lost opens its name without O_EXCL, taking over a file made there since (its bytes hidden under the PM copy's)|test fuse_stacked a_file_made_in_pm_is_made_again_when_the_lower_file_system_loses_its_creation"
    "standalone-flags-ignored|crates/hashfs-spfs/src/standalone.rs|a file made with O_SYNC, O_DSYNC or O_DIRECT starts below like any other (SPFS's standalone rule for them ignored: through a passthrough mount it is then never promoted while open)|test stack files_made_to_sync_start_in_pm"
    "standalone-extension-prefix|crates/hashfs-spfs/src/standalone.rs|an extension matches the start of a name's part, as the released SPFS's does (x.logger starts in PM for extension=log)|test stack files_made_to_sync_start_in_pm"
    "standalone-boost-stale|crates/hashfs-spfs/src/standalone.rs|a directory's user.hashfs.boost removed through the mount is still taken as set for up to a second (files made there meanwhile start in PM)|test fuse_stacked files_made_to_sync_start_in_pm_and_skip_passthrough"
    "standalone-made-after-open|crates/hashfs-fuse/src/stacked.rs|the mount's create chooses the new file's open mode before the standalone rules place it (the file opens by passthrough and is never made in PM)|test fuse_stacked files_made_to_sync_start_in_pm_and_skip_passthrough"
    "settled-ctime-ignored|crates/hashfs-spfs/src/settled.rs|a file below opened for writing in a hot directory is promoted at the open though it changed after the last syncfs began (its fsyncs are absorbed while bytes PM does not hold may still be lost below)|stacked-unit settled::tests::a_file_unchanged_since_a_syncfs_is_promoted_at_its_open_in_a_hot_directory"
    "settled-open-under-handles|crates/hashfs-spfs/src/settled.rs|a file below is promoted at an open while other handles of it are open (a passthrough handle's writes go on reaching the lower file, under the PM copy that now hides it)|stacked-unit settled::tests::a_file_unchanged_since_a_syncfs_is_promoted_at_its_open_in_a_hot_directory"
    "settled-mark-without-syncfs|crates/hashfs-spfs/src/settled.rs|the write-back thread takes the lower file system as synced without running its syncfs, so a file promoted at its open as settled below has bytes there that a power cut takes (its PM copy holds only the blocks written since)|test lower_power_cut files_settled_below_keep_their_bytes_through_a_power_cut_of_the_lower_disk"
    "writeback-without-lower-fsync|crates/hashfs-spfs/src/absorb.rs|write-back drops a file's PM copy once its bytes are written below, without the lower fsync (a power cut of the lower disk then takes what only the PM copy held; the stacked explorer's lower file never loses a write)|test lower_power_cut bytes_below_a_promotion_and_a_write_back_survive_a_power_cut_of_the_lower_disk"
    "promoted-before-lower-fsync|crates/hashfs-spfs/src/file.rs|the fsync that makes the profiler promote a file skips its lower fsync (the file's last writes below are not durable, and the PM copy, which absorbs every later fsync, does not hold them)|test lower_power_cut bytes_below_a_promotion_and_a_write_back_survive_a_power_cut_of_the_lower_disk"
    "deferred-promotion-unsynced|crates/hashfs-spfs/src/file.rs|a promotion that waited for passthrough handles to close is made at the next open without a lower fsync, so bytes they wrote after the fsync that asked for it are taken as durable (a power cut of the lower disk takes them, though a later absorbed fsync acknowledged them)|test lower_power_cut a_promotion_deferred_past_passthrough_handles_keeps_their_later_writes_through_a_power_cut"
    "settled-not-asked-at-open|crates/hashfs-spfs/src/settled.rs|an open in a hot directory that finds its file not settled asks for no syncfs, so no message delivered below is ever promoted at its open|test fuse_stacked a_message_settled_below_is_absorbed_at_its_open_in_a_hot_directory"
    "dirty-limit-kept|crates/hashfs-cli/src/mountcmd.rs|the stacked mount keeps the kernel's dirty page limit for FUSE (1%, strict), so a writer without sync waits for the daemon at every page (4 KiB random writes at 0.3x of ext4)|test fuse_stacked the_mount_has_a_block_devices_dirty_page_limits"
    "stacked-uring-not-asked|crates/hashfs-fuse/src/stacked.rs|the stacked mount asked for io_uring does not ask the kernel for it at init (every request goes through /dev/fuse, the rings' queue threads idle)|test fuse_uring a_stacked_mount_serves_absorbs_and_passes_through_over_the_rings"
    "passthrough-promoted-under-handles|crates/hashfs-spfs/src/file.rs|a file whose fsyncs ask for promotion is promoted while passthrough handles of it are open (their writes go on reaching the lower file, under the PM copy that now hides it)|test fuse_stacked passthrough_serves_files_below_and_promotes_at_the_next_open"
    "profiles-saved-in-place|crates/hashfs-spfs/src/saved_profiles.rs|a save of the Sync Factors removes the old table and writes the new one under its name (a crash between leaves no table, or an empty one, where the old or the new must be)|stacked"
    "takeover-leftovers-kept|crates/hashfs/src/fs/shared/mod.rs|a participant that takes over after a dead one releases its read side but not its open inodes and descriptions (an unlinked file the dead one had open stays allocated until the last participant leaves, and its descriptions stay taken)|test crash_consistency explore_several_descriptors"
    "fork-mutex-parking-lot|crates/hashfs/src/fs/shared/fork_mutex.rs|the locks a process holds across fork are parking_lot's, whose unlock may hand the lock to a thread that waited for it at the fork, which the child does not have (the child's next use of the descriptor table waits forever: Redis's BGREWRITEAOF child hung so)|unit a_child_that_lets_go_of_its_copy_can_take_it_again"
    "fork-rwlock-parking-lot|crates/hashfs/src/fs/shared/fork_mutex.rs|a read-only participant's call lock, held for writing across its fork, is parking_lot's, whose unlock may hand it to a thread that waited to read at the fork, which the child does not have (the child's next fork waits forever)|unit a_child_that_lets_go_of_its_copy_of_the_rwlock_can_write_it"
    "takeover-inode-bits-kept|crates/hashfs/src/fs/shared/mod.rs|a participant that recovers the image after a dead one leaves the region's inode bitmap as the dead one left it (only an image's first mount puts its scan there): an inode the dead one's rolled-back create took stays taken, and one a call it finished made can be handed out again|death create,mkdir"
    "reaped-death-forgotten|crates/hashfs/src/fs/shared/join.rs|a join that finds a participant dead and reaps its slot does not tell the last participant to leave to look through the inode table (an unlinked file only the dead one's hold kept stays in an image marked clean, which the next mount refuses)|test shared_mount the_last_to_leave_frees_what_a_reaped_holder_kept"
    "leave-ignores-dead-slots|crates/hashfs/src/fs/shared/mod.rs|the last participant to leave looks through the inode table only when told to, not when a dead participant's slot is still unreaped (its orphans and tagged sizes are left in an image marked clean)|test shared_mount the_last_to_leave_frees_what_a_killed_holder_kept"
    "repair-skips-keys|crates/hashfs/src/mapping/hashfs/purge.rs|HashFS's repair after a crash passes over every key of the table (an EMPTY slot a crash left on a key's path stays there, and lookups stop at it and miss the key)|unit repair_restores_reachability"
    "summary-bits-unbuilt|crates/hashfs/src/fs/shared/mod.rs|a first participant that took a clean unmount's counts never builds the region's inode bitmap: its first create takes an inode in use (the root's)|test shared_mount a_first_participant_takes_a_clean_unmounts_counts"
    "summary-free-uncounted|crates/hashfs/src/fs/shared/mod.rs|an inode freed before the region's inode bitmap is built is not counted: the counts the next clean unmount leaves are one too many|test shared_mount a_first_participant_takes_a_clean_unmounts_counts"
    "summary-stamp-ignored|crates/hashfs/src/layout/superblock.rs|a clean unmount's counts are taken whatever mount count they were taken at: those an older build left behind stand for an image it changed since|test shared_mount counts_an_older_build_left_behind_are_not_taken"
    "summary-not-checked|crates/hashfs/src/fs/recovery.rs|a mount that reads the tables does not check a clean unmount's counts against them: counts that disagree are taken by the next first participant|test shared_mount counts_that_disagree_with_the_tables_are_refused_and_repaired"
    "fsck-summary-unchecked|crates/hashfs/src/fs/fsck/check.rs|fsck does not check a clean unmount's counts against the tables|test shared_mount counts_that_disagree_with_the_tables_are_refused_and_repaired"
    "repair-summary-kept|crates/hashfs/src/fs/fsck/mod.rs|fsck --repair keeps the counts a clean unmount left, wrong ones and those its writes outside a mount make stale|test shared_mount counts_that_disagree_with_the_tables_are_refused_and_repaired"
    "takeover-scans-unbuilt-bits|crates/hashfs/src/fs/shared/mod.rs|a takeover's recovery reads only the inodes of the region's bitmap also when it is not built (a first participant took a clean unmount's counts and no one made a file since): it reads none, and frees every file's blocks as strays|test shared_mount a_takeover_before_the_inode_bitmap_is_built_recovers_every_file"
    "chown-same-ctime-unpersisted|crates/hashfs/src/fs/ops.rs|a chown to the owner a file has sets the change time in DRAM only (a crash after the call returns shows the old one)|test fence_costs a_chown_to_the_owner_the_file_has_takes_one_fence"
    "create-bit-after-commit|crates/hashfs/src/fs/ops.rs|a create takes its inode's bit in the region only after its transaction commits: a participant killed between leaves a file a takeover's recovery, reading only the bitmap's inodes, does not see (its blocks freed as strays, its number handed out again)|death create,mkdir,symlink"
    "scope-claims-unnamed|crates/hashfs/src/fs/data.rs|a claim of blocks is not named in the record of the call's scope: a participant killed between its claim and its commit leaves reservations (and keys past the size) that a scoped takeover does not look for|death append,write-past-eof,fill-hole"
    "scope-release-unnamed|crates/hashfs/src/fs/data.rs|a shrink does not name the blocks it frees in the record of the call's scope: a participant killed after the smaller size committed leaves keys past it that a scoped takeover does not free|death truncate-down"
    "scope-growth-unnamed|crates/hashfs/src/fs/data.rs|a write that grows a file within its last block names nothing before it writes past the size: a participant killed before the size leaves bytes past EOF that a scoped takeover does not zero|death append-small,overwrite-tail"
    "scope-alloc-unnamed|crates/hashfs/src/fs/shared/mod.rs|a create takes its inode's bit without naming the inode in the record of the call's scope: a participant killed before the create's transaction leaves the bit of a free inode taken, counted in the next clean unmount's counts|death create,mkdir,symlink"
    "scope-not-reset|crates/hashfs/src/fs/shared/mod.rs|a call does not reset the record of its scope as it takes the image lock: its record stays as a join left it (not described), so every takeover recovers the whole image, and what it costs grows with the image again|test shared_mount a_participant_killed_inside_a_call_is_recovered_by_the_next"
    "scoped-counts-unfixed|crates/hashfs/src/fs/shared/takeover.rs|a scoped takeover does not set the block counts of the inodes it repairs: a punch or a fast append killed between its slots and its count leaves a count fsck refuses|death punch,append-small,append"
    "scoped-used-unmoved|crates/hashfs/src/fs/shared/takeover.rs|a scoped takeover takes the table's used count as the dead call found it: the slots the call added or freed are not counted, and the next clean unmount's counts disagree with the table|death create,append,truncate-down"
    "scoped-reservations-kept|crates/hashfs/src/fs/shared/takeover.rs|a scoped takeover frees the keys past EOF of the ranges it walks but not the reservations on their paths: the blocks a dead write claimed stay taken|death append,write-past-eof,fill-hole"
    "scoped-tails-kept|crates/hashfs/src/fs/shared/takeover.rs|a scoped takeover does not zero the bytes past EOF of the files it repairs|death append-small,overwrite-tail"
    "scoped-bits-kept|crates/hashfs/src/fs/shared/takeover.rs|a scoped takeover leaves the region's inode bits of the inodes it repairs as the dead call left them: a rolled-back create's inode stays taken|death create,mkdir,symlink"
    "scoped-frees-pinned|crates/hashfs/src/fs/shared/takeover.rs|a scoped takeover frees an unlinked file the dead call named without asking whether a read-only participant pins it: the reader's open file is freed under it|unit a_file_a_read_only_participant_pins_outlives_a_takeover"
    "scope-untorn-unnamed|crates/hashfs/src/fs/untorn.rs|an untorn write does not name its range in the record of the call's scope: a participant killed inside its key switch leaves a second copy of a key (or a reservation) that a scoped takeover does not look for|death untorn-small,untorn-block,untorn-overwrite"
    "scoped-inode-count-kept|crates/hashfs/src/fs/shared/takeover.rs|a scoped takeover sets the named inodes' bits but leaves the bitmap's count as the dead call left it: a create killed between its bit and its count, or a rolled-back one, leaves the next clean unmount's inode count wrong|death create,mkdir,unlink"
    "ctfs-unlogged-pswap|crates/hashfs/src/mapping/ctfs/tx.rs|ctFS's partition move stores its page-table swap straight to PM before the transaction that names the new partition (the released ctFS's order)|ctfs append,write-past-eof,truncate-down"
    "unlink-free-slots-first|crates/hashfs/src/fs/hashfs/unlink.rs|an unlink that frees its file in its own transaction (HashFS) tombstones the file's slots before that transaction: a crash between leaves the name of a file whose blocks are gone|ops unlink-small"
    "unlink-free-unscoped|crates/hashfs/src/fs/hashfs/unlink.rs|an unlink that frees its file in its own transaction does not name the file's blocks in the record of the call's scope: a participant killed after the transaction leaves keys of a free inode that a scoped takeover does not free|death unlink-small"
    "unlink-free-while-open|crates/hashfs/src/fs/hashfs/unlink.rs|an unlink frees its file in its own transaction though a descriptor of this process still has it open (its reads and writes land on a free inode)|test posix_semantics unlinked_open_file_lives_until_close"
    "unlink-free-open-elsewhere|crates/hashfs/src/fs/hashfs/unlink.rs|an unlink frees its file in its own transaction though another participant of the image still has it open|test shared_mount an_unlinked_file_stays_while_another_participant_has_it_open"
    "open-trunc-skipped|crates/hashfs/src/fs/api.rs|an open with O_TRUNC of a file that exists truncates nothing (the check that skips a truncation when the open made the file is always taken)|test fence_costs an_open_that_makes_its_file_truncates_nothing"
    "descriptor-link-unserved|crates/hashfs-preload/src/shim/path.rs|a path through the kernel's link to a shim descriptor (/proc/self/fd/N, /dev/fd/N) goes to the kernel, which opens the descriptor's placeholder, /dev/null: a write through it is lost, a read finds nothing|test call_answers descriptor_links_answer_as_the_kernels"
    "descriptor-link-reopened-by-name|crates/hashfs-preload/src/shim/fd.rs|an open of the link to a shim descriptor opens the name the descriptor was opened by, not its file (an unlinked file's link opens nothing, a renamed one's another file)|test call_answers descriptor_links_answer_as_the_kernels"
    "cwd-link-unserved|crates/hashfs-preload/src/shim/path.rs|a path through /proc/self/cwd while the working directory is in the image goes to the kernel's working directory, the removed one the shim parks the process in (a listing is empty, an open ENOENT)|test call_answers descriptor_links_answer_as_the_kernels"
    "vfork-kept-with-close-on-exec-files|crates/hashfs-preload/src/shim/exec.rs|a vfork stays a vfork while the process has only close-on-exec descriptors of the image: the child (Python's subprocess with pass_fds) makes one inheritable and closes the others one by one in its parent's memory (the passed one is /dev/null in the next program, the parent's others EBADF)|test exec a_subprocess_given_files_of_the_image_gets_them_and_leaves_the_parents"
    "pump-end-closed-by-close-range|crates/hashfs-preload/src/shim/pump.rs|a program's close_range (or close of every descriptor) closes the pipe end of a pump the shim started for its standard input or output (Python's subprocess child with stdin= or stdout= a file of the image: the next program reads nothing, or its output is lost)|test exec a_child_that_closes_from_a_number_on_keeps_its_output_into_the_image"
    "exec-keeps-pump-copies|crates/hashfs-preload/src/shim/pump.rs|an exec that leaves the image keeps the close-on-exec copies of its pumps' pipes that dash keeps to put a standard descriptor back, and waits a second for each pump they keep going (a pipeline's program run by sh with its error output put on its standard output, the shell's in the image: autoreconf 13.4 s against 1.9 s on tmpfs)|test exec an_exec_with_a_kept_copy_of_its_pumped_error_output_does_not_wait"
    "detached-pump-not-waited|crates/hashfs-preload/src/shim/pump.rs|a process that leaves the image at an exec does not wait for the pump that goes on without a descriptor (a background job still writing a redirection the shell undid): the exec ends it, the job's output is lost and the image is left busy|test exec an_exec_after_a_redirection_was_undone_waits_for_the_pump_that_goes_on"
    "mapping-not-followed|crates/hashfs-preload/src/shim/mmap/follow.rs|no thread follows the other processes' changes into this process's mappings: a copy keeps its old bytes, pages past the end of a file another process grew stay zeros, a hole another process wrote stays zeros|test processes a_mapping_shows_what_another_process_writes"
    "follow-data-unwatched|crates/hashfs-preload/src/shim/mmap/follow.rs|the follower never reads the ring of data changes, so another process's overwrite in place (named nowhere else) never reaches a copy|test processes a_mapping_shows_what_another_process_writes"
    "follow-holes-unmapped|crates/hashfs-preload/src/shim/mmap.rs|the follower maps pages another process grew the file over and refreshes copies, but not the holes another process filled (their pages stay zeros)|test processes a_mapping_shows_what_another_process_writes"
    "follow-not-in-child|crates/hashfs-preload/src/shim/mmap.rs|a forked child does not follow the mappings it inherited (the parent's follower thread is not the child's): another process's overwrite never reaches the child's copy|test processes a_forked_child_follows_the_mappings_it_inherited"
    "close-range-uninterposed|crates/hashfs-interpose/src/export.rs|close_range is not interposed: a program's close of every descriptor from a number on (close_range, glibc's closefrom) closes the pipe end of the pump the shim runs for a standard descriptor (a child whose output goes into the image dies of SIGPIPE at its next write)|test exec a_child_that_closes_from_a_number_on_keeps_its_output_into_the_image"
    "shim-open-trunc-skipped|crates/hashfs-preload/src/shim/fd.rs|the shim's open with O_TRUNC of a file that exists truncates nothing (a shell's > leaves the old bytes past what it writes)|test processes a_shell_and_the_programs_it_starts_share_the_image"
    "exec-prepared-when-it-fails-at-once|crates/hashfs-interpose/src/entry/program.rs|an exec the kernel refuses at once (no such program, no execute permission) is prepared as one that runs: the process that mounted the image leaves it, and dash's exec through each directory of PATH, or a program that goes on after a failed exec, finds its image paths EIO|test exec an_exec_that_fails_at_once_leaves_the_image_as_it_was"
    "dir-claim-inside-shim|crates/hashfs-interpose/src/entry/streams.rs|the interposed readdir asks the backend whether a stream is its own even inside the backend's own calls, taking its table of streams: a forked child's start-up reads /proc while the fork holds that table, and hangs|test forks a_child_forked_beside_a_killed_participant_starts"
    "vfork-child-chdir-shared|crates/hashfs-preload/src/shim/cwd.rs|a vfork child's chdir into the image sets the working directory the shim keeps in memory, which is its parent's: after Python's subprocess with cwd= in the image, the parent's relative paths go to the child's directory|test call_answers a_childs_working_directory_is_its_own"
    "standard-seek-to-kernel|crates/hashfs-interpose/src/entry/io.rs|lseek on a standard descriptor goes to the kernel, which answers for the pipe that stands for the file it was redirected to (dd's seek= on the output it reopens onto standard output fails: Illegal seek)|test apps dd_seeks_in_the_output_it_reopens_onto_standard_output"
    "shim-open-resolve-unheld|crates/hashfs-preload/src/shim/fd.rs|the shim's open resolves the name and opens its inode in two holds of the image lock: another process's rename over the name and create of a new file between them give it the freed inode number, and an atomic save's reader opens the new, empty file|test processes an_atomic_save_is_read_whole_by_another_process"
    "mprotect-writes-read-only-map|crates/hashfs-preload/src/shim/mmap.rs|mprotect makes a shared mapping of a file opened read-only writable (the kernel's mapping is of the image, open for writing), and stores through it reach the file|test call_answers mappings_answer_as_the_kernels"
    "cwd-kept-by-path|crates/hashfs-preload/src/shim/cwd.rs|the working directory inside the image is kept by its path: after a rename of it relative paths go to the old name (or to what another call made there), and a removed one's getcwd gives its old path|test call_answers the_working_directory_follows_renames_as_the_kernels"
    "open-inodes-unpurged|crates/hashfs/src/share/image.rs|the shared region's table of open inodes keeps every slot a closed inode took: once each was used, every search for an inode no one has open passes all 4,096 (each create and unlink through the shim)|unit share::image::tests::closed_inodes_leave_no_slot_on_the_searches_path"
    "open-inodes-purge-past-held|crates/hashfs/src/share/image.rs|a close that ends its run in the table of open inodes empties the slots before it up to a never-used one, held ones included: an inode another participant has open is no longer found, and an unlinked file it reads is freed under it|unit share::image::tests::a_run_keeps_the_slots_before_a_held_one"
    "rename-frees-linked-target|crates/hashfs/src/fs/rename.rs|a rename over a file frees it in its own transaction even when the file has another link: the other name is left on a free inode|test fence_costs a_rename_over_a_last_link_frees_the_file_and_over_another_link_keeps_it"
    "snapshot-offset-kept-at-exit|crates/hashfs-preload/src/shim/pump.rs|a process ending does not give its standard input snapshot's offset back to the description: after head -n1 <&3 the shell's descriptor 3 reads the line head had read|test input_snapshots redirected_inputs_answer_as_the_kernels"
    "snapshot-offset-kept-at-replace|crates/hashfs-preload/src/shim/pump.rs|standard input put back does not give its snapshot's offset back to the description: after a shell's read x <&3 the next reader of descriptor 3 starts at the line read had taken|test input_snapshots redirected_inputs_answer_as_the_kernels"
    "snapshot-unnamed-at-exec|crates/hashfs-preload/src/shim/exec.rs|an exec does not name standard input's snapshot to the next program: its fstat answers the memfd (cat < f >> f copies f onto itself) and its offset never goes back to the description|test input_snapshots redirected_inputs_answer_as_the_kernels"
    "spawn-snapshot-unnamed|crates/hashfs-preload/src/shim/exec.rs|posix_spawn does not name standard input's snapshot to the program it starts: the program's fstat of its input answers the memfd, not the file|test input_snapshots redirected_inputs_answer_as_the_kernels"
    "snapshot-fstat-memfd|crates/hashfs-preload/src/shim/pump.rs|fstat of a snapshot on standard input answers the memfd, not the file: GNU cat does not see that its input is its output (cat < f >> f appends f to itself)|test input_snapshots redirected_inputs_answer_as_the_kernels"
    "input-pump-feeds-itself|crates/hashfs-preload/src/shim/pump.rs|a pumped standard input (a file over 16 MiB) that its program also writes as its output is read on into what the program appends: cat < f >> f appends f to itself until the image is full|test input_snapshots an_input_that_is_its_programs_output_is_read_to_its_size"
    "pump-workers-not-kept|crates/hashfs-preload/src/shim/workers.rs|a pump's thread ends with its work instead of waiting for the next pump: every redirection into the image makes a thread again (a third of a shell's echo x >> f)|test apps a_loop_of_redirections_keeps_no_thread_stacks"
    "workers-kept-in-child|crates/hashfs-preload/src/shim/workers.rs|a forked child keeps its parent's list of idle pump threads, which are not in the child: the pump it starts is handed to a thread that does not exist, and each subshell's exit waits a second for it|test apps a_loop_of_redirections_keeps_no_thread_stacks"
    "pump-threads-take-signals|crates/hashfs/src/pm/mod.rs|the threads the shim starts in a program's process (pumps, the mappings' follower) block no signal but SIGPIPE: a signal sent to a program that blocks it in its main thread to sigwait for it is taken by such a thread, whose default action ends the program|test processes a_signal_the_program_waits_for_is_not_taken_by_a_pump_thread"
    "pool-taken-thread-ends|crates/hashfs-preload/src/shim/workers.rs|a pool thread whose wait for a job ended as a caller took it out of the list ends too: the caller's pump never runs (its output never reaches the file, its waiters wait for ever)|preload-unit every_job_runs_once_while_idle_threads_come_and_go"
)


# The cargo arguments that select one library's unit tests ($1): the workspace less the
# other libraries. (Never `-p`: one package alone resolves its dependencies' features apart
# from the workspace's and builds everything again; hashfs-cli, which has no library, stays
# in and keeps every dependency's features the workspace's.)
lib_only() {
    local c
    echo --workspace --lib
    for c in hashfs hashfs-fuse hashfs-preload hashfs-spfs hashfs-spfs-shim hashfs-interpose hashfs-crashtest; do
        [ "$c" = "$1" ] || echo --exclude "$c"
    done
}

# Builds the scratch tree (the explorer, or the library's tests); a bug that does not build
# proves nothing, so a build failure stops the script.
build_check() {
    local check=$1
    local cargo=(cargo test -q --profile crash-bugs)
    case $check in
        unit\ *) (cd "$work/src" && "${cargo[@]}" $(lib_only hashfs) --no-run) >"$work/build.log" 2>&1 ;;
        stacked-unit\ *) (cd "$work/src" && "${cargo[@]}" $(lib_only hashfs-spfs) --no-run) >"$work/build.log" 2>&1 ;;
        preload-unit\ *) (cd "$work/src" && "${cargo[@]}" $(lib_only hashfs-preload) --no-run) >"$work/build.log" 2>&1 ;;
        test\ *)
            local t=${check#test }
            (cd "$work/src" && "${cargo[@]}" --workspace --test "${t%% *}" --no-run &&
                # The mount's tests beside shim processes load the shim, another package's
                # library, which their own build does not make.
                if [ "${t%% *}" = fuse_shared ]; then
                    cargo build -q --profile crash-bugs --workspace --lib
                fi) >"$work/build.log" 2>&1 ;;
        stacked) (cd "$work/src" && "${cargo[@]}" $(lib_only hashfs-spfs) --no-run) >"$work/build.log" 2>&1 ;;
        # The explorer's program of its own: it links the file system alone, not the mount
        # and the stacked mode that `hashfs` links (a rebuild about 3.5 s shorter).
        *) (cd "$work/src" && cargo build -q --profile crash-bugs --workspace --bin hashfs-crashtest) \
            >"$work/build.log" 2>&1 ;;
    esac || { echo "crash-bugs: the scratch tree does not build for $check:" >&2; tail -20 "$work/build.log" >&2; exit 2; }
}

# Builds every program the checks $@ need in two cargo calls (the test programs and the
# libraries' unit tests; the explorer and the libraries), before `build_check` finds each
# fresh: one cargo call per program built them one after another, a cold scratch tree's
# test programs about 27 links in a row, where one call builds them side by side (the
# whole baseline, cold, 916 s → 862 s on 2 cores, 2026-12-06). The
# arguments are those of `build_check`'s own calls, so that its later calls rebuild
# nothing (the workspace's features resolve alike: `lib_only`).
prebuild() {
    local tests=() units=0 programs=0 libraries=0 check t
    for check in "$@"; do
        case $check in
            unit\ * | stacked-unit\ * | preload-unit\ * | stacked) units=1 ;;
            test\ *)
                t=${check#test }
                tests+=(--test "${t%% *}")
                [ "${t%% *}" != fuse_shared ] || libraries=1
                ;;
            *) programs=1 ;;
        esac
    done
    {
        if [ ${#tests[@]} -gt 0 ] || [ $units = 1 ]; then
            (cd "$work/src" && cargo test -q --profile crash-bugs --workspace --no-run \
                $([ $units = 0 ] || echo --lib) "${tests[@]}")
        fi &&
            if [ $programs = 1 ] || [ $libraries = 1 ]; then
                (cd "$work/src" && cargo build -q --profile crash-bugs --workspace \
                    $([ $libraries = 0 ] || echo --lib) $([ $programs = 0 ] || echo --bin hashfs-crashtest))
            fi
    } >"$work/build.log" 2>&1 ||
        { echo "crash-bugs: the scratch tree does not build:" >&2; tail -20 "$work/build.log" >&2; exit 2; }
}

# Runs bug $1's check on the scratch tree (built); its exit status is the check's.
run_check() {
    local check=$1
    local crashtest="$CARGO_TARGET_DIR/crash-bugs/hashfs-crashtest"
    local common=(--seq 1 --seed "$seed" --samples 16 --recovery-images 2)
    case $check in
        unit\ *)
            # (the names unquoted: the baseline's check runs several at once)
            (cd "$work/src" && cargo test -q --profile crash-bugs $(lib_only hashfs) -- ${check#unit }) >"$work/check.log" 2>&1 ;;
        stacked-unit\ *)
            (cd "$work/src" && cargo test -q --profile crash-bugs $(lib_only hashfs-spfs) -- ${check#stacked-unit }) \
                >"$work/check.log" 2>&1 ;;
        preload-unit\ *)
            (cd "$work/src" && cargo test -q --profile crash-bugs $(lib_only hashfs-preload) -- ${check#preload-unit }) \
                >"$work/check.log" 2>&1 ;;
        test\ *)
            local t=${check#test }
            (cd "$work/src" && cargo test -q --profile crash-bugs --workspace --test "${t%% *}" -- --exact ${t#* }) \
                >"$work/check.log" 2>&1 ;;
        ops\ *)
            "$crashtest" --mapping hashfs,extent-tree,cuckoo --ops "${check#ops }" "${common[@]}" >"$work/check.log" 2>&1 ;;
        recoveries\ *)
            "$crashtest" --mapping hashfs,extent-tree,cuckoo --ops "${check#recoveries }" --seq 1 \
                --seed "$seed" --samples 16 >"$work/check.log" 2>&1 ;;
        death\ *)
            "$crashtest" --mapping hashfs,extent-tree,cuckoo --model death --ops "${check#death }" --seq 1 \
                --seed "$seed" >"$work/check.log" 2>&1 ;;
        strict\ *)
            "$crashtest" --mapping hashfs,extent-tree,cuckoo --write-mode strict --ops "${check#strict }" \
                "${common[@]}" >"$work/check.log" 2>&1 ;;
        workload\ *)
            "$crashtest" --mapping hashfs,extent-tree,cuckoo --workload "${check#workload }" \
                --seed "$seed" --samples 16 --recovery-images 2 >"$work/check.log" 2>&1 ;;
        grouped-workload\ *)
            "$crashtest" --mapping hashfs --placement grouped --workload "${check#grouped-workload }" \
                --seed "$seed" --samples 16 --recovery-images 2 >"$work/check.log" 2>&1 ;;
        stacked)
            (cd "$work/src" && cargo test -q --profile crash-bugs $(lib_only hashfs-spfs) crashtest) >"$work/check.log" 2>&1 ;;
        ctfs\ *)
            "$crashtest" --mapping ctfs --ops "${check#ctfs }" "${common[@]}" >"$work/check.log" 2>&1 ;;
        grouped\ *)
            "$crashtest" --mapping hashfs --placement grouped --ops "${check#grouped }" "${common[@]}" \
                >"$work/check.log" 2>&1 ;;
        regions\ *)
            "$crashtest" --mapping hashfs --placement regions --ops "${check#regions }" --seq 1 \
                --seed "$seed" --samples 16 --recovery-images 1 >"$work/check.log" 2>&1 ;;
        regions-death\ *)
            "$crashtest" --mapping hashfs --placement regions --model death --ops "${check#regions-death }" \
                --seq 1 --seed "$seed" >"$work/check.log" 2>&1 ;;
    esac
}


# The bugs themselves are scripts/plant-bugs.py's: most planted at once, each switched on
# at run time by its name in HASHFS_PLANTED_BUG, a few rebuilt alone.
names=()
for b in "${bugs[@]}"; do
    IFS='|' read -r name _ _ check <<<"$b"
    # Four fields: a `|` in a description would make the rest of it the check (its runs
    # then fail as "not caught", whatever the bug does).
    case $check in
        *"|"* | "") echo "crash-bugs: $name: not four fields separated by '|' (no '|' in a description)" >&2; exit 2 ;;
    esac
    names+=("$name")
done
if [ "${1:-}" = --check-patterns ]; then
    # Every bug still applies to the tree as it is (a change to the code a bug patches must
    # update the bug), and the two lists name the same bugs: a second, without building
    # anything; the quick tier runs it.
    exec python3 scripts/plant-bugs.py check . "${names[@]}"
fi
rebuilt=$(python3 scripts/plant-bugs.py rebuilt)
unset HASHFS_PLANTED_BUG
# The scratch copy: the tree with every switchable bug planted (and the rebuilt bug $1
# applied); only the files that differ from the copy's are written, so cargo rebuilds only
# what they change.
sync_copy() {
    mkdir -p "$work/src"
    python3 scripts/plant-bugs.py sync . "$work/src" "$@"
}

if [ "${1:-}" = --table ]; then
    echo "| bug | file | what it does | caught by |"
    echo "|---|---|---|---|"
    for b in "${bugs[@]}"; do
        IFS='|' read -r name file what check <<<"$b"
        echo "| \`$name\` | \`${file#crates/}\` | $what | \`$check\` |"
    done
    exit 0
fi

chosen=()
if [ "${1:-}" = --changed ]; then
    # The files that differ from the base (committed or not), and the new ones.
    base=${HASHFS_CHANGED_SINCE:-HEAD}
    changed=$( { git diff --name-only "$base" -- && git ls-files --others --exclude-standard; } 2>/dev/null) ||
        { echo "crash-bugs: cannot list the files changed since $base (git)" >&2; exit 2; }
    # A bug whose own change (its module in scripts/bugs/) differs runs too; every bug when
    # the planting itself does.
    redone=""
    if grep -qxE 'scripts/(plant-bugs\.py|bugs/planting\.py)' <<<"$changed"; then
        redone=$(printf '%s\n' "${names[@]}")
    else
        for m in $(grep -xE 'scripts/bugs/[a-z_]+\.py' <<<"$changed" || true); do
            [ -f "$m" ] && redone+=$(sed -n 's/^@bug("\([a-z0-9-]*\)".*/\1/p' "$m")$'\n'
        done
    fi
    for b in "${bugs[@]}"; do
        IFS='|' read -r name file _ _ <<<"$b"
        if grep -qxF "$file" <<<"$changed" || grep -qxF "$name" <<<"$redone"; then chosen+=("$b"); fi
    done
    if [ ${#chosen[@]} -eq 0 ]; then
        echo "no deliberate bug is in a file changed since $base, nor changed itself"
        exit 0
    fi
else
    selected=("$@")
    for b in "${bugs[@]}"; do
        IFS='|' read -r name _ _ _ <<<"$b"
        if [ ${#selected[@]} -eq 0 ] || [[ " ${selected[*]} " == *" $name "* ]]; then
            chosen+=("$b")
        fi
    done
    [ ${#chosen[@]} -gt 0 ] || { echo "crash-bugs: no bug named ${selected[*]}" >&2; exit 2; }
fi

# The copy with no bug switched on (the tree's code) passes every check, each explored state
# once: the checks that explore named operations alone (ops, recoveries, strict, death, ctfs,
# grouped, regions) run as one check per kind over the union of their operations (each
# operation's states are seeded by the operation's own crash points, so the union explores
# exactly the states the checks would), the others once each however many bugs share them:
# the tests of one test program in one run of it, as are the libraries' unit tests (one
# cargo call and one program started for each, not one per test: a test program's tests
# run side by side there as in the workspace's own run). Their builds are the only ones the
# switchable bugs need.
sync_copy
declare -A union=() passed=() batch=()
baseline=()
for b in "${chosen[@]}"; do
    IFS='|' read -r _ _ _ check <<<"$b"
    case $check in
        ops\ * | recoveries\ * | strict\ * | death\ * | ctfs\ * | grouped\ * | regions\ * | regions-death\ *)
            kind=${check%% *}
            [ -n "${union[$kind]:-}" ] || baseline+=("$kind")
            union[$kind]="${union[$kind]:-}${union[$kind]:+,}${check#* }"
            ;;
        test\ * | unit\ * | stacked-unit\ * | preload-unit\ *)
            # "test <program> <name>", "unit <name>", "stacked-unit <name>", "preload-unit
            # <name>": one check
            # of the names of each program (run_check takes several).
            case $check in test\ *) group=${check% *} ;; *) group=${check%% *} ;; esac
            [ -n "${batch[$group]:-}" ] || baseline+=("$group")
            batch[$group]+=" ${check##* }"
            ;;
        *)
            [ -z "${passed[$check]:-}" ] || continue
            passed[$check]=1
            baseline+=("$check")
            ;;
    esac
done
for i in "${!baseline[@]}"; do
    check=${baseline[$i]}
    if [ -n "${union[$check]:-}" ]; then
        baseline[$i]="$check $(tr , '\n' <<<"${union[$check]}" | sort -u | paste -sd, -)"
    elif [ -n "${batch[$check]:-}" ]; then
        baseline[$i]="$check $(tr ' ' '\n' <<<"${batch[$check]}" | sed '/^$/d' | sort -u | paste -sd' ' -)"
    fi
done
prebuild "${baseline[@]}"
for check in "${baseline[@]}"; do
    build_check "$check"
    t0=$SECONDS
    if ! run_check "$check"; then
        echo "crash-bugs: the tree (no bug switched on) fails the check $check:" >&2
        tail -30 "$work/check.log" >&2
        exit 1
    fi
    # Where the baseline's time goes (CI has 90 minutes): its longer checks.
    [ $((SECONDS - t0)) -lt 10 ] || echo "baseline    ${check:0:100} ($((SECONDS - t0)) s)"
done
echo "no bug      every check passes ($SECONDS s)"

# The switchable bugs first (no build), then the rebuilt ones, each on a copy of its own.
ordered=()
for b in "${chosen[@]}"; do
    IFS='|' read -r name _ _ _ <<<"$b"
    grep -qxF "$name" <<<"$rebuilt" || ordered+=("$b")
done
for b in "${chosen[@]}"; do
    IFS='|' read -r name _ _ _ <<<"$b"
    ! grep -qxF "$name" <<<"$rebuilt" || ordered+=("$b")
done
failed=0
missed=()
resync=""
for b in "${ordered[@]}"; do
    IFS='|' read -r name file what check <<<"$b"
    built=""
    if grep -qxF "$name" <<<"$rebuilt"; then
        sync_copy "$name"
        resync=1
        t0=$SECONDS
        build_check "$check"
        built="built in $((SECONDS - t0)) s, "
    fi
    t1=$SECONDS
    # The explorer's checks are deterministic (seeded); a test or unit check of threads or
    # processes racing catches its race with some probability per run, so it gets up to
    # three runs, and the line says which caught it.
    tries=1
    case $check in test\ * | unit\ * | stacked-unit\ * | preload-unit\ *) tries=3 ;; esac
    caught=0
    for ((try = 1; try <= tries; try++)); do
        if ! HASHFS_PLANTED_BUG=$name run_check "$check"; then caught=$try; break; fi
    done
    if [ $caught -eq 0 ]; then
        echo "NOT CAUGHT  $name ($tries runs): $what ($file)"
        missed+=("$name")
        failed=1
    else
        first=$(grep -m1 -E "^FAILED|panicked at|^error" "$work/check.log" || true)
        on=""
        [ $caught -eq 1 ] || on=", on run $caught"
        echo "caught      $name (${built}caught in $((SECONDS - t1)) s$on): $what; $check: ${first:-failed}"
        grep -m1 "reproduce:" "$work/check.log" | sed 's/^ */            /' || true
    fi
done
# The copy as the next run starts from it (no rebuilt bug applied).
[ -z "$resync" ] || sync_copy
# Again at the end, where a log cut in the middle (CI's) still shows it.
if [ ${#missed[@]} -gt 0 ]; then
    echo "crash-bugs: NOT CAUGHT: ${missed[*]}" >&2
fi
exit $failed
