//! A test-only FUSE file system that loses every byte not fsynced: the "LazyFS technique".
//!
//! Everything lives in memory. File **data** (content and size) becomes durable only when
//! `fsync`/`fdatasync` is called on that file; [`LazyFs::power_loss`] unmounts (the kernel's
//! caches go with the mount) and reverts every file's content and size to what it was at its last
//! fsync/fdatasync. A file never fsynced comes back empty (size 0).
//!
//! **Namespace operations are durable immediately**: create, mkdir, unlink, rmdir, rename, link,
//! symlink and attribute changes (mode, owner, times) survive a power loss as soon as they
//! return, like the metadata journal of a journaling file system (ext4 `data=ordered`, XFS). Data
//! is what is lost. So the classic "write a temp file, rename it over the target without fsyncing
//! the temp file" bug shows up as an empty target after the power loss, which is exactly what
//! these tests are for. `fsync` of a directory succeeds (and counts) but changes nothing, as the
//! namespace is already durable.
//!
//! Fault injection:
//! * [`LazyFs::crash_at_fsync`]: the n-th fsync/fdatasync/fsyncdir from now does not take effect;
//!   the file system freezes instead: that call and every later operation that would change
//!   anything fails with `EIO` (reads keep working), so nothing more becomes durable. Together
//!   with [`LazyFs::power_loss`] this is "the power went out right before that fsync".
//! * [`LazyFs::fail_next_fsync`]: the next fsync/fdatasync of a file fails with `EIO` and makes
//!   nothing durable; later ones work normally (and then make the data durable after all).
//!
//! * [`LazyFs::power_loss_with_writeback`]: a power loss after which a pseudo-random half of the
//!   changed pages (within each file's durable size) survived anyway, as if the kernel had
//!   written them back on its own: unsynced data may be lost, or half there.
//! * [`LazyFs::fail_reads`]: every read fails with `EIO` until turned off, as while the device
//!   under a file system fails; nothing stored changes. Together with
//!   [`LazyFs::bypass_page_cache`] every read of a file reaches this file system (otherwise the
//!   kernel answers reads of pages it cached from its cache).
//! * [`LazyFs::report_no_size`]: `statfs` reports a file system of no size (0 blocks, 0 free),
//!   as some FUSE and network file systems do; writes still work.
//!
//! [`LazyFs::fsyncs`] counts every fsync/fdatasync/fsyncdir request the file system received,
//! including failed ones, across mounts.
//!
//! Notes on what the kernel does without asking this file system:
//! * File locks (`flock`, as sled's `try_lock_exclusive` uses, and `fcntl` locks) are handled
//!   locally by the kernel's FUSE client because this file system does not opt in to
//!   `FUSE_FLOCK_LOCKS`/`FUSE_POSIX_LOCKS`; they work between processes on the same mount.
//! * `sync_file_range(2)` never reaches a FUSE file system (there is no such FUSE request) and
//!   therefore makes nothing durable here. sled 0.34 writes its log with `pwrite` +
//!   `sync_file_range` and only calls `fsync` (`File::sync_all`) from its periodic flusher thread
//!   (every `flush_every_ms`, 500 ms by default) and when the `Db` is dropped; `Db::flush()` by
//!   itself does not fsync.
//! * Writes are write-through (no `FUSE_WRITEBACK_CACHE`), so every `write(2)` reaches this file
//!   system before it returns; attribute and entry TTLs are 0.
//!
//! Mounting needs `/dev/fuse` and, for the direct `mount(2)` the `fuser` crate does first, root
//! (`CAP_SYS_ADMIN`). Without that privilege `fuser` falls back to the setuid helper
//! `fusermount3` (Debian package `fuse3`). Mount failures are returned as errors; nothing here
//! ever skips.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem,
    FopenFlags, Generation, INodeNo, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};

/// Page granularity of the in-memory file data (and of `statfs`).
const PAGE_SIZE: usize = 4096;
const PAGE: u64 = PAGE_SIZE as u64;
/// Attribute and entry cache time: none, so the kernel never serves stale attributes.
const TTL: Duration = Duration::ZERO;
/// Size reported by `statfs`: 16 GiB, free = total - used.
const TOTAL_BYTES: u64 = 16 << 30;
const TOTAL_INODES: u64 = 1 << 20;
const NAME_MAX: usize = 255;

// Linux `open(2)` and `stat(2)` constants (the same on x86_64, aarch64 and riscv64); spelled out
// to avoid a `libc` dependency.
const O_EXCL: i32 = 0o200;
const O_TRUNC: i32 = 0o1000;
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;

type Page = Box<[u8; PAGE_SIZE]>;

fn zero_page() -> Page {
    Box::new([0; PAGE_SIZE])
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The content of a regular file: the current pages and size, and the durable ones (as of the
/// last fsync). Invariant: a page index not in `dirty` is equal (or equally absent) in `pages`
/// and `durable_pages`; an absent page reads as zeros; bytes past the size are zero.
#[derive(Default)]
struct FileData {
    pages: BTreeMap<u64, Page>,
    size: u64,
    dirty: BTreeSet<u64>,
    durable_pages: BTreeMap<u64, Page>,
    durable_size: u64,
}

impl FileData {
    fn read(&self, offset: u64, len: u32) -> Vec<u8> {
        if offset >= self.size {
            return Vec::new();
        }
        let end = self.size.min(offset.saturating_add(u64::from(len)));
        let mut out = Vec::with_capacity(usize::try_from(end - offset).unwrap_or(0));
        let mut pos = offset;
        while pos < end {
            let in_page = (pos % PAGE) as usize;
            let n = (PAGE - pos % PAGE).min(end - pos) as usize;
            match self.pages.get(&(pos / PAGE)) {
                Some(page) => out.extend_from_slice(&page[in_page..in_page + n]),
                None => out.resize(out.len() + n, 0),
            }
            pos += n as u64;
        }
        out
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Errno> {
        let end = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        let mut pos = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let index = pos / PAGE;
            let in_page = (pos % PAGE) as usize;
            let n = (PAGE_SIZE - in_page).min(rest.len());
            let page = self.pages.entry(index).or_insert_with(zero_page);
            page[in_page..in_page + n].copy_from_slice(&rest[..n]);
            self.dirty.insert(index);
            pos += n as u64;
            rest = &rest[n..];
        }
        self.size = self.size.max(end);
        Ok(())
    }

    /// Truncates or extends (with zeros).
    fn set_size(&mut self, size: u64) {
        if size < self.size {
            let gone = self.pages.split_off(&size.div_ceil(PAGE));
            self.dirty.extend(gone.into_keys());
            let tail = (size % PAGE) as usize;
            if tail != 0 {
                let index = size / PAGE;
                if let Some(page) = self.pages.get_mut(&index) {
                    page[tail..].fill(0);
                    self.dirty.insert(index);
                }
            }
        }
        self.size = size;
    }

    /// fsync: the current content and size become durable. Copies only the changed pages.
    fn sync(&mut self) {
        copy_pages(
            std::mem::take(&mut self.dirty),
            &self.pages,
            &mut self.durable_pages,
        );
        self.durable_size = self.size;
    }

    /// Power loss: back to the durable size, and to the durable content except for the changed
    /// pages inside it for which `written_back` holds (the kernel had written them back on its
    /// own before the power went; without an fsync a grown size is still lost).
    fn revert(&mut self, written_back: impl Fn(u64) -> bool) {
        let durable_pages = self.durable_size.div_ceil(PAGE_SIZE as u64);
        let (kept, lost): (Vec<u64>, Vec<u64>) = std::mem::take(&mut self.dirty)
            .into_iter()
            .partition(|&i| i < durable_pages && written_back(i));
        copy_pages(kept, &self.pages, &mut self.durable_pages);
        copy_pages(lost, &self.durable_pages, &mut self.pages);
        self.size = self.durable_size;
    }
}

/// A well-mixed 64-bit hash of two numbers (splitmix64's finaliser).
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a.wrapping_add(b.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Makes the pages `indexes` of `to` what they are in `from` (absent where `from` has none).
fn copy_pages(
    indexes: impl IntoIterator<Item = u64>,
    from: &BTreeMap<u64, Page>,
    to: &mut BTreeMap<u64, Page>,
) {
    for index in indexes {
        match (from.get(&index), to.get_mut(&index)) {
            (Some(page), Some(dest)) => dest.copy_from_slice(&page[..]),
            (Some(page), None) => {
                to.insert(index, page.clone());
            }
            (None, _) => {
                to.remove(&index);
            }
        }
    }
}

enum Node {
    File(FileData),
    Dir {
        parent: u64,
        entries: BTreeMap<OsString, u64>,
    },
    Symlink(PathBuf),
}

struct Inode {
    node: Node,
    perm: u16,
    uid: u32,
    gid: u32,
    /// Hard links (non-directories; a directory's count is computed).
    nlink: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
    crtime: SystemTime,
    /// Open file handles: an unlinked file stays until the last one is released.
    open_handles: u32,
}

impl Inode {
    fn new(node: Node, perm: u16, uid: u32, gid: u32) -> Inode {
        let now = SystemTime::now();
        Inode {
            node,
            perm,
            uid,
            gid,
            nlink: 1,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            open_handles: 0,
        }
    }

    fn kind(&self) -> FileType {
        match self.node {
            Node::File(_) => FileType::RegularFile,
            Node::Dir { .. } => FileType::Directory,
            Node::Symlink(_) => FileType::Symlink,
        }
    }

    fn file_mut(&mut self) -> Result<&mut FileData, Errno> {
        match &mut self.node {
            Node::File(data) => Ok(data),
            Node::Dir { .. } => Err(Errno::EISDIR),
            Node::Symlink(_) => Err(Errno::EINVAL),
        }
    }

    fn touch(&mut self) {
        let now = SystemTime::now();
        self.mtime = now;
        self.ctime = now;
    }
}

/// Everything, shared by the `LazyFs` handle and the FUSE session threads of all its mounts.
struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    next_fh: u64,
    /// Directory listings taken at `readdir` offset 0, by directory handle.
    dir_snapshots: HashMap<u64, Vec<(u64, FileType, OsString)>>,
    /// Bumped at every power loss: requests from an older mount's session fail with EIO.
    epoch: u64,
    fsyncs: u64,
    crash_countdown: Option<u64>,
    frozen: bool,
    fail_next_fsync: bool,
    /// Every read fails with EIO (a failing device).
    fail_reads: bool,
    /// `statfs` reports 0 blocks (a file system that cannot say its size).
    no_size: bool,
    /// Files opened from now on bypass the kernel's page cache.
    direct_io: bool,
}

impl State {
    fn new(root_perm: u16, uid: u32, gid: u32) -> State {
        let root = INodeNo::ROOT.0;
        let mut inodes = HashMap::new();
        inodes.insert(
            root,
            Inode::new(
                Node::Dir {
                    parent: root,
                    entries: BTreeMap::new(),
                },
                root_perm,
                uid,
                gid,
            ),
        );
        State {
            inodes,
            next_ino: root + 1,
            next_fh: 1,
            dir_snapshots: HashMap::new(),
            epoch: 0,
            fsyncs: 0,
            crash_countdown: None,
            frozen: false,
            fail_next_fsync: false,
            fail_reads: false,
            no_size: false,
            direct_io: false,
        }
    }

    /// What `open` and `create` answer with: direct I/O when asked for.
    fn open_flags(&self) -> FopenFlags {
        if self.direct_io {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        }
    }

    fn inode(&self, ino: u64) -> Result<&Inode, Errno> {
        self.inodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn inode_mut(&mut self, ino: u64) -> Result<&mut Inode, Errno> {
        self.inodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    fn entries(&self, dir: u64) -> Result<&BTreeMap<OsString, u64>, Errno> {
        match &self.inode(dir)?.node {
            Node::Dir { entries, .. } => Ok(entries),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn entries_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match &mut self.inode_mut(dir)?.node {
            Node::Dir { entries, .. } => Ok(entries),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn parent_of(&self, dir: u64) -> Result<u64, Errno> {
        match &self.inode(dir)?.node {
            Node::Dir { parent, .. } => Ok(*parent),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn lookup(&self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        match name.as_bytes() {
            b"." => {
                self.entries(parent)?;
                Ok(parent)
            }
            b".." => self.parent_of(parent),
            _ => self
                .entries(parent)?
                .get(name)
                .copied()
                .ok_or(Errno::ENOENT),
        }
    }

    fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let inode = self.inode(ino)?;
        let (size, blocks, nlink) = match &inode.node {
            Node::File(data) => (
                data.size,
                data.pages.len() as u64 * (PAGE / 512),
                inode.nlink,
            ),
            Node::Dir { entries, .. } => {
                let subdirs = entries
                    .values()
                    .filter(|child| {
                        self.inodes
                            .get(child)
                            .is_some_and(|c| matches!(c.node, Node::Dir { .. }))
                    })
                    .count();
                (
                    PAGE,
                    PAGE / 512,
                    2 + u32::try_from(subdirs).unwrap_or(u32::MAX - 2),
                )
            }
            Node::Symlink(target) => (target.as_os_str().len() as u64, 0, inode.nlink),
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks,
            atime: inode.atime,
            mtime: inode.mtime,
            ctime: inode.ctime,
            crtime: inode.crtime,
            kind: inode.kind(),
            perm: inode.perm,
            nlink,
            uid: inode.uid,
            gid: inode.gid,
            rdev: 0,
            blksize: PAGE_SIZE as u32,
            flags: 0,
        })
    }

    /// Adds a new inode under `parent/name` (EEXIST if the name is taken).
    fn add(&mut self, parent: u64, name: &OsStr, inode: Inode) -> Result<u64, Errno> {
        if name.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        if name.is_empty() || name == "." || name == ".." || name.as_bytes().contains(&b'/') {
            return Err(Errno::EINVAL);
        }
        if self.entries(parent)?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, inode);
        self.entries_mut(parent)?.insert(name.to_owned(), ino);
        self.inode_mut(parent)?.touch();
        Ok(ino)
    }

    /// Drops one link to `ino` (already removed from its directory); frees the inode when no
    /// link and no open handle is left.
    fn drop_link(&mut self, ino: u64) {
        let Some(inode) = self.inodes.get_mut(&ino) else {
            return;
        };
        if matches!(inode.node, Node::Dir { .. }) {
            self.inodes.remove(&ino);
            return;
        }
        inode.nlink = inode.nlink.saturating_sub(1);
        inode.ctime = SystemTime::now();
        if inode.nlink == 0 && inode.open_handles == 0 {
            self.inodes.remove(&ino);
        }
    }

    fn open_handle(&mut self, ino: u64) -> Result<u64, Errno> {
        let inode = self.inode_mut(ino)?;
        inode.open_handles = inode.open_handles.saturating_add(1);
        let fh = self.next_fh;
        self.next_fh += 1;
        Ok(fh)
    }

    /// An fsync/fdatasync/fsyncdir request: counts it and applies the armed faults.
    fn barrier(&mut self, on_file: bool) -> Result<(), Errno> {
        self.fsyncs += 1;
        if self.frozen {
            return Err(Errno::EIO);
        }
        if let Some(n) = self.crash_countdown {
            if n <= 1 {
                self.crash_countdown = None;
                self.frozen = true;
                return Err(Errno::EIO);
            }
            self.crash_countdown = Some(n - 1);
        }
        if on_file && self.fail_next_fsync {
            self.fail_next_fsync = false;
            return Err(Errno::EIO);
        }
        Ok(())
    }

    fn used_bytes(&self) -> u64 {
        self.inodes
            .values()
            .map(|inode| match &inode.node {
                Node::File(data) => data.pages.len() as u64 * PAGE,
                _ => PAGE,
            })
            .sum()
    }

    /// Reverts all data to its durable state (with `writeback`, a pseudo-random half of the
    /// changed pages, chosen by that seed, had reached the disk anyway) and forgets everything
    /// about the old mount.
    fn power_loss(&mut self, writeback: Option<u64>) {
        self.inodes
            .retain(|_, inode| matches!(inode.node, Node::Dir { .. }) || inode.nlink > 0);
        for (&ino, inode) in self.inodes.iter_mut() {
            inode.open_handles = 0;
            if let Node::File(data) = &mut inode.node {
                data.revert(|page| writeback.is_some_and(|seed| mix(seed ^ ino, page) & 1 == 0));
            }
        }
        self.dir_snapshots.clear();
        self.crash_countdown = None;
        self.frozen = false;
        self.fail_next_fsync = false;
    }

    fn create(
        &mut self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Result<(FileAttr, u64), Errno> {
        if mode & S_IFMT != 0 && mode & S_IFMT != S_IFREG {
            return Err(Errno::ENOTSUP);
        }
        let ino = match self.lookup(parent, name) {
            Ok(ino) => {
                if flags & O_EXCL != 0 {
                    return Err(Errno::EEXIST);
                }
                let inode = self.inode_mut(ino)?;
                let data = inode.file_mut()?;
                if flags & O_TRUNC != 0 {
                    data.set_size(0);
                    inode.touch();
                }
                ino
            }
            Err(e) if e == Errno::ENOENT => {
                let perm = (mode & !umask & 0o7777) as u16;
                let inode = Inode::new(Node::File(FileData::default()), perm, req.uid(), req.gid());
                self.add(parent, name, inode)?
            }
            Err(e) => return Err(e),
        };
        let fh = self.open_handle(ino)?;
        Ok((self.attr(ino)?, fh))
    }

    /// Whether `ino` may be removed (or replaced) as a directory (`dir`) or as a non-directory.
    fn removable(&self, ino: u64, dir: bool) -> Result<(), Errno> {
        match (&self.inode(ino)?.node, dir) {
            (Node::Dir { entries, .. }, true) if !entries.is_empty() => Err(Errno::ENOTEMPTY),
            (Node::Dir { .. }, false) => Err(Errno::EISDIR),
            (Node::Dir { .. }, true) | (_, false) => Ok(()),
            (_, true) => Err(Errno::ENOTDIR),
        }
    }

    fn unlink(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        self.removable(ino, dir)?;
        self.entries_mut(parent)?.remove(name);
        self.inode_mut(parent)?.touch();
        self.drop_link(ino);
        Ok(())
    }

    /// Whether `dir` is `ancestor` or lies below it.
    fn is_within(&self, mut dir: u64, ancestor: u64) -> bool {
        loop {
            if dir == ancestor {
                return true;
            }
            match self.parent_of(dir) {
                Ok(parent) if parent != dir => dir = parent,
                _ => return false,
            }
        }
    }

    fn set_parent(&mut self, ino: u64, new_parent: u64) {
        if let Some(Inode {
            node: Node::Dir { parent, .. },
            ..
        }) = self.inodes.get_mut(&ino)
        {
            *parent = new_parent;
        }
    }

    fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if newname.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        if flags.contains(RenameFlags::RENAME_WHITEOUT)
            || flags.contains(RenameFlags::RENAME_NOREPLACE | RenameFlags::RENAME_EXCHANGE)
        {
            return Err(Errno::EINVAL);
        }
        let src = self.lookup(parent, name)?;
        self.entries(newparent)?;
        let src_is_dir = matches!(self.inode(src)?.node, Node::Dir { .. });
        if src_is_dir && self.is_within(newparent, src) {
            return Err(Errno::EINVAL);
        }
        let dst = match self.lookup(newparent, newname) {
            Ok(dst) => Some(dst),
            Err(e) if e == Errno::ENOENT => None,
            Err(e) => return Err(e),
        };
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            let dst = dst.ok_or(Errno::ENOENT)?;
            let dst_is_dir = matches!(self.inode(dst)?.node, Node::Dir { .. });
            if dst_is_dir && self.is_within(parent, dst) {
                return Err(Errno::EINVAL);
            }
            self.entries_mut(parent)?.insert(name.to_owned(), dst);
            self.entries_mut(newparent)?.insert(newname.to_owned(), src);
            self.set_parent(src, newparent);
            self.set_parent(dst, parent);
        } else {
            if let Some(dst) = dst {
                if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                    return Err(Errno::EEXIST);
                }
                if dst == src {
                    return Ok(());
                }
                self.removable(dst, src_is_dir)?;
                self.drop_link(dst);
            }
            self.entries_mut(parent)?.remove(name);
            self.entries_mut(newparent)?.insert(newname.to_owned(), src);
            self.set_parent(src, newparent);
        }
        self.inode_mut(parent)?.touch();
        self.inode_mut(newparent)?.touch();
        self.inode_mut(src)?.ctime = SystemTime::now();
        Ok(())
    }

    fn link(&mut self, ino: u64, newparent: u64, newname: &OsStr) -> Result<FileAttr, Errno> {
        if matches!(self.inode(ino)?.node, Node::Dir { .. }) {
            return Err(Errno::EPERM);
        }
        if newname.len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        if self.entries(newparent)?.contains_key(newname) {
            return Err(Errno::EEXIST);
        }
        self.entries_mut(newparent)?.insert(newname.to_owned(), ino);
        self.inode_mut(newparent)?.touch();
        let inode = self.inode_mut(ino)?;
        inode.nlink = inode.nlink.saturating_add(1);
        inode.ctime = SystemTime::now();
        self.attr(ino)
    }

    fn snapshot_dir(&self, ino: u64) -> Result<Vec<(u64, FileType, OsString)>, Errno> {
        let entries = self.entries(ino)?;
        let mut list = Vec::with_capacity(entries.len() + 2);
        list.push((ino, FileType::Directory, OsString::from(".")));
        list.push((
            self.parent_of(ino)?,
            FileType::Directory,
            OsString::from(".."),
        ));
        for (name, child) in entries {
            if let Some(inode) = self.inodes.get(child) {
                list.push((*child, inode.kind(), name.clone()));
            }
        }
        Ok(list)
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("inodes", &self.inodes.len())
            .field("epoch", &self.epoch)
            .field("fsyncs", &self.fsyncs)
            .field("crash_countdown", &self.crash_countdown)
            .field("frozen", &self.frozen)
            .field("fail_next_fsync", &self.fail_next_fsync)
            .finish_non_exhaustive()
    }
}

/// The `fuser::Filesystem` of one mount.
#[derive(Debug)]
struct LazyOps {
    state: Arc<Mutex<State>>,
    /// The power-loss epoch this mount belongs to.
    epoch: u64,
}

impl LazyOps {
    /// The state, for a request that changes nothing. EIO if this mount is from before a power
    /// loss (a lazily detached mount whose files were still open).
    fn state(&self) -> Result<MutexGuard<'_, State>, Errno> {
        let state = lock(&self.state);
        if state.epoch == self.epoch {
            Ok(state)
        } else {
            Err(Errno::EIO)
        }
    }

    /// The state, for a request that changes something: EIO when frozen by a crash.
    fn state_mut(&self) -> Result<MutexGuard<'_, State>, Errno> {
        let state = self.state()?;
        if state.frozen {
            Err(Errno::EIO)
        } else {
            Ok(state)
        }
    }

    fn new_node(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        node: Node,
        perm: u16,
    ) -> Result<FileAttr, Errno> {
        let mut state = self.state_mut()?;
        let ino = state.add(parent.0, name, Inode::new(node, perm, req.uid(), req.gid()))?;
        state.attr(ino)
    }
}

fn reply_entry(reply: ReplyEntry, result: Result<FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn reply_attr(reply: ReplyAttr, result: Result<FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.attr(&TTL, &attr),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for LazyOps {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let result = self.state().and_then(|state| {
            let ino = state.lookup(parent.0, name)?;
            state.attr(ino)
        });
        reply_entry(reply, result);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply_attr(reply, self.state().and_then(|state| state.attr(ino.0)));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = self.state_mut().and_then(|mut state| {
            let inode = state.inode_mut(ino.0)?;
            let now = SystemTime::now();
            let resolve = |t: TimeOrNow| match t {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => now,
            };
            if let Some(size) = size {
                inode.file_mut()?.set_size(size);
                inode.mtime = now;
            }
            if let Some(mode) = mode {
                inode.perm = (mode & 0o7777) as u16;
            }
            if let Some(uid) = uid {
                inode.uid = uid;
            }
            if let Some(gid) = gid {
                inode.gid = gid;
            }
            if let Some(atime) = atime {
                inode.atime = resolve(atime);
            }
            if let Some(mtime) = mtime {
                inode.mtime = resolve(mtime);
            }
            inode.ctime = now;
            state.attr(ino.0)
        });
        reply_attr(reply, result);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let result = self
            .state()
            .and_then(|state| match &state.inode(ino.0)?.node {
                Node::Symlink(target) => Ok(target.as_os_str().as_bytes().to_vec()),
                _ => Err(Errno::EINVAL),
            });
        match result {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let result = if mode & S_IFMT == S_IFREG || mode & S_IFMT == 0 {
            let perm = (mode & !umask & 0o7777) as u16;
            self.new_node(req, parent, name, Node::File(FileData::default()), perm)
        } else {
            Err(Errno::ENOTSUP)
        };
        reply_entry(reply, result);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let node = Node::Dir {
            parent: parent.0,
            entries: BTreeMap::new(),
        };
        let perm = (mode & !umask & 0o7777) as u16;
        reply_entry(reply, self.new_node(req, parent, name, node, perm));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self
            .state_mut()
            .and_then(|mut state| state.unlink(parent.0, name, false));
        reply_empty(reply, result);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self
            .state_mut()
            .and_then(|mut state| state.unlink(parent.0, name, true));
        reply_empty(reply, result);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let node = Node::Symlink(target.to_path_buf());
        reply_entry(reply, self.new_node(req, parent, link_name, node, 0o777));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let result = self
            .state_mut()
            .and_then(|mut state| state.rename(parent.0, name, newparent.0, newname, flags));
        reply_empty(reply, result);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let result = self
            .state_mut()
            .and_then(|mut state| state.link(ino.0, newparent.0, newname));
        reply_entry(reply, result);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let result = if flags.0 & O_TRUNC != 0 {
            // Only sent with FUSE_ATOMIC_O_TRUNC, which is not negotiated (the kernel truncates
            // with setattr), but honour it anyway.
            self.state_mut().and_then(|mut state| {
                let inode = state.inode_mut(ino.0)?;
                inode.file_mut()?.set_size(0);
                inode.touch();
                Ok((state.open_handle(ino.0)?, state.open_flags()))
            })
        } else {
            self.state().and_then(|mut state| {
                if matches!(state.inode(ino.0)?.node, Node::Dir { .. }) {
                    return Err(Errno::EISDIR);
                }
                Ok((state.open_handle(ino.0)?, state.open_flags()))
            })
        };
        match result {
            Ok((fh, flags)) => reply.opened(FileHandle(fh), flags),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let result = self
            .state()
            .and_then(|state| match &state.inode(ino.0)?.node {
                _ if state.fail_reads => Err(Errno::EIO),
                Node::File(data) => Ok(data.read(offset, size)),
                Node::Dir { .. } => Err(Errno::EISDIR),
                Node::Symlink(_) => Err(Errno::EINVAL),
            });
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let result = self.state_mut().and_then(|mut state| {
            let inode = state.inode_mut(ino.0)?;
            inode.file_mut()?.write(offset, data)?;
            inode.touch();
            u32::try_from(data.len()).map_err(|_| Errno::EINVAL)
        });
        match result {
            Ok(written) => reply.written(written),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut state) = self.state()
            && let Some(inode) = state.inodes.get_mut(&ino.0)
        {
            inode.open_handles = inode.open_handles.saturating_sub(1);
            if inode.open_handles == 0
                && inode.nlink == 0
                && !matches!(inode.node, Node::Dir { .. })
            {
                state.inodes.remove(&ino.0);
            }
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // fsync and fdatasync alike make the file's data and size durable.
        let result = self.state().and_then(|mut state| {
            state.barrier(true)?;
            if let Node::File(data) = &mut state.inode_mut(ino.0)?.node {
                data.sync();
            }
            Ok(())
        });
        reply_empty(reply, result);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let result = self.state().and_then(|mut state| {
            state.entries(ino.0)?;
            let fh = state.next_fh;
            state.next_fh += 1;
            Ok(fh)
        });
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut state = match self.state() {
            Ok(state) => state,
            Err(e) => return reply.error(e),
        };
        // A listing is taken at offset 0 (opendir or rewinddir) and served from there on, so
        // that entries added or removed meanwhile neither repeat nor shift the rest.
        if offset == 0 || !state.dir_snapshots.contains_key(&fh.0) {
            match state.snapshot_dir(ino.0) {
                Ok(list) => {
                    state.dir_snapshots.insert(fh.0, list);
                }
                Err(e) => return reply.error(e),
            }
        }
        let list = &state.dir_snapshots[&fh.0];
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (child, kind, name)) in list.iter().enumerate().skip(start) {
            if reply.add(INodeNo(*child), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut state) = self.state() {
            state.dir_snapshots.remove(&fh.0);
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // The namespace is durable already: only count and apply the armed faults.
        let result = self.state().and_then(|mut state| {
            state.entries(ino.0)?;
            state.barrier(false)
        });
        reply_empty(reply, result);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.state() {
            Ok(state) => {
                let (blocks, free) = if state.no_size {
                    (0, 0)
                } else {
                    let free = TOTAL_BYTES.saturating_sub(state.used_bytes()) / PAGE;
                    (TOTAL_BYTES / PAGE, free)
                };
                let files_free = TOTAL_INODES.saturating_sub(state.inodes.len() as u64);
                reply.statfs(
                    blocks,
                    free,
                    free,
                    TOTAL_INODES,
                    files_free,
                    PAGE_SIZE as u32,
                    NAME_MAX as u32,
                    PAGE_SIZE as u32,
                );
            }
            Err(e) => reply.error(e),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply_empty(
            reply,
            self.state()
                .and_then(|state| state.inode(ino.0).map(|_| ())),
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let result = self.state_mut().and_then(|mut state| {
            let (attr, fh) = state.create(req, parent.0, name, mode, umask, flags)?;
            Ok((attr, fh, state.open_flags()))
        });
        match result {
            Ok((attr, fh, flags)) => {
                reply.created(&TTL, &attr, Generation(0), FileHandle(fh), flags);
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let result = self.state_mut().and_then(|mut state| {
            if mode != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
            let inode = state.inode_mut(ino.0)?;
            let data = inode.file_mut()?;
            if end > data.size {
                data.set_size(end);
                inode.touch();
            }
            Ok(())
        });
        reply_empty(reply, result);
    }
}

/// A mounted [LazyFS](self) file system; see the module documentation.
pub struct LazyFs {
    state: Arc<Mutex<State>>,
    session: Option<BackgroundSession>,
    mountpoint: PathBuf,
}

impl LazyFs {
    /// Mounts a new, empty file system at `mountpoint` (an existing empty directory). Errors
    /// loudly (io::Error with a clear message) if FUSE cannot be mounted; never skips.
    pub fn mount(mountpoint: &Path) -> io::Result<LazyFs> {
        let meta = std::fs::metadata(mountpoint).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("LazyFs: mount point {}: {e}", mountpoint.display()),
            )
        })?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!(
                    "LazyFs: mount point {} is not a directory",
                    mountpoint.display()
                ),
            ));
        }
        let state = State::new((meta.mode() & 0o7777) as u16, meta.uid(), meta.gid());
        let mut fs = LazyFs {
            state: Arc::new(Mutex::new(state)),
            session: None,
            mountpoint: mountpoint.to_path_buf(),
        };
        fs.remount()?;
        Ok(fs)
    }

    /// Power loss: unmounts (the kernel's caches go with the mount), then drops every byte not
    /// fsynced: each file's content and size revert to its last fsync/fdatasync. Also clears
    /// any armed crash/failure and the frozen state. Call `remount` afterwards.
    ///
    /// Files still open on the mount (by this process, or by a process that has not exited
    /// yet) make the unmount busy; the mount is then detached lazily and every later request on
    /// those open files fails with EIO.
    pub fn power_loss(&mut self) {
        self.lose_power(None);
    }

    /// [`LazyFs::power_loss`], except that the kernel had already written back a pseudo-random
    /// half (chosen by `seed`) of the changed pages within each file's durable size: what an
    /// unsynced write may leave behind on a real disk.
    pub fn power_loss_with_writeback(&mut self, seed: u64) {
        self.lose_power(Some(seed));
    }

    fn lose_power(&mut self, writeback: Option<u64>) {
        // From here on, requests of the current mount fail: nothing more becomes durable.
        lock(&self.state).epoch += 1;
        self.unmount();
        lock(&self.state).power_loss(writeback);
    }

    /// Mounts the (reverted) state again at the same mount point. Does nothing if mounted.
    pub fn remount(&mut self) -> io::Result<()> {
        if self.session.is_some() {
            return Ok(());
        }
        let ops = LazyOps {
            state: Arc::clone(&self.state),
            epoch: lock(&self.state).epoch,
        };
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("lazyfs".to_owned())];
        config.n_threads = Some(1);
        let session = fuser::spawn_mount(ops, &self.mountpoint, &config).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "LazyFs: cannot mount FUSE at {}: {e} (needs /dev/fuse, and root with \
                     CAP_SYS_ADMIN or else the setuid fusermount3 from the fuse3 package)",
                    self.mountpoint.display()
                ),
            )
        })?;
        self.session = Some(session);
        Ok(())
    }

    /// Arms a crash: the `n`-th fsync/fdatasync/fsyncdir from now (1 = the next one; 0 counts
    /// as 1) does NOT take effect; instead the file system freezes: that call and every later
    /// operation that would change anything (write, setattr/truncate, create, mkdir, unlink,
    /// rename, fsync, fallocate...) fails with EIO, so nothing more becomes durable — "the
    /// power went right before this barrier's fsync". Reads keep working.
    pub fn crash_at_fsync(&self, n: u64) {
        lock(&self.state).crash_countdown = Some(n.max(1));
    }

    /// Whether an armed crash has happened (the file system is frozen).
    pub fn crashed(&self) -> bool {
        lock(&self.state).frozen
    }

    /// The next fsync/fdatasync on a FILE (not a directory) fails with EIO and makes nothing
    /// durable; later ones work normally again.
    pub fn fail_next_fsync(&self) {
        lock(&self.state).fail_next_fsync = true;
    }

    /// While `on`, every read fails with EIO, as while the device under a file system fails;
    /// nothing stored changes, and reads work again once it is turned off. Reads of pages the
    /// kernel cached do not reach this file system unless [`LazyFs::bypass_page_cache`].
    pub fn fail_reads(&self, on: bool) {
        lock(&self.state).fail_reads = on;
    }

    /// Files opened from now on bypass the kernel's page cache (`FOPEN_DIRECT_IO`), so that
    /// every read reaches this file system. Call it before the files are opened.
    pub fn bypass_page_cache(&self) {
        lock(&self.state).direct_io = true;
    }

    /// While `on`, `statfs` reports a file system of no size (0 blocks, 0 free, 0 available),
    /// as some FUSE and network file systems do; writes work as before.
    pub fn report_no_size(&self, on: bool) {
        lock(&self.state).no_size = on;
    }

    /// Number of fsync/fdatasync/fsyncdir calls so far (all mounts), failed ones included.
    pub fn fsyncs(&self) -> u64 {
        lock(&self.state).fsyncs
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Unmounts; if the mount is busy (open files), detaches it lazily instead.
    fn unmount(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        if session.umount_and_join().is_err() {
            lazy_unmount(&self.mountpoint);
        }
    }
}

/// `umount -l`, or `fusermount3 -uz` / `fusermount -uz` where `umount` is missing.
fn lazy_unmount(mountpoint: &Path) {
    let tools: [(&str, &[&str]); 3] = [
        ("umount", &["-l"]),
        ("fusermount3", &["-u", "-z"]),
        ("fusermount", &["-u", "-z"]),
    ];
    for (program, args) in tools {
        let status = Command::new(program)
            .args(args)
            .arg(mountpoint)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if status.is_ok_and(|s| s.success()) {
            return;
        }
    }
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        lock(&self.state).epoch += 1;
        self.unmount();
    }
}

impl fmt::Debug for LazyFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyFs")
            .field("mountpoint", &self.mountpoint)
            .field("mounted", &self.session.is_some())
            .field("state", &*lock(&self.state))
            .finish()
    }
}
