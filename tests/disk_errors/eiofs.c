/*
 * eiofs: a FUSE passthrough filesystem whose one folder fails with EIO on demand, for
 * tests/disk_errors.rs (issue 17; docs/node.md, "Storage faults").
 *
 *   eiofs BACKING MOUNTPOINT FAULTY_FOLDER TRIGGER_FILE [HOLD_FILE]
 *
 * Every operation on MOUNTPOINT is done on the same path under BACKING. While TRIGGER_FILE
 * exists (a path outside the mount, checked on every call), every write, fsync, fdatasync,
 * fallocate, truncate, folder fsync and rename onto a path under MOUNTPOINT/FAULTY_FOLDER
 * answers EIO, as a failing disk would; reads, listings, everything else, and every other path
 * go through. Each
 * refused call is logged to stderr ("eiofs: EIO write /A-0/0.log"), so the test can tell the
 * fault was met.
 *
 * HOLD_FILE, when given: while it exists, every read of a file under MOUNTPOINT/FAULTY_FOLDER
 * waits (looking again every 10 ms) until it is removed, as a disk too busy to answer would,
 * and logs "eiofs: held read /A-0/0.log" as it begins to wait (net/tests/server_zero_copy.rs:
 * the server's thread must not wait with it).
 *
 * O_DIRECT: the kernel's FUSE client accepts an O_DIRECT open and sends the writes through
 * synchronously (no page cache); this file opens the backing file without O_DIRECT (the
 * buffers libfuse hands it carry no alignment), and fdatasync keeps the durability.
 *
 * Built by the test with `gcc eiofs.c $(pkg-config --cflags --libs fuse3)` (Debian:
 * libfuse3-dev, fuse3; scripts/test-all.sh installs them). Runs in the foreground (-f) as
 * root; unmounted by `umount -l MOUNTPOINT` or `fusermount3 -u`.
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

static const char *backing;
static char faulty[PATH_MAX];
static size_t faulty_len;
static const char *trigger;
static const char *hold;

/* The backing path of a path under the mount ("/A-0/0.log"). */
static void real_path(char out[PATH_MAX], const char *path) {
    snprintf(out, PATH_MAX, "%s%s", backing, path);
}

/* Whether `op` on `path` fails now: the trigger exists and the path is the faulty folder or
 * under it. */
static int refused(const char *op, const char *path) {
    if (access(trigger, F_OK) != 0) return 0;
    if (strncmp(path, faulty, faulty_len) != 0) return 0;
    if (path[faulty_len] != '\0' && path[faulty_len] != '/') return 0;
    fprintf(stderr, "eiofs: EIO %s %s\n", op, path);
    return 1;
}

/* Waits while the hold file exists, for a read of `path` under the faulty folder. */
static void held(const char *op, const char *path) {
    if (hold == NULL || access(hold, F_OK) != 0) return;
    if (strncmp(path, faulty, faulty_len) != 0) return;
    if (path[faulty_len] != '\0' && path[faulty_len] != '/') return;
    fprintf(stderr, "eiofs: held %s %s\n", op, path);
    while (access(hold, F_OK) == 0) usleep(10000);
}

static void *eio_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    (void)conn;
    cfg->use_ino = 1;
    /* No caching of names or attributes: the node sees every change at once. */
    cfg->entry_timeout = 0;
    cfg->attr_timeout = 0;
    cfg->negative_timeout = 0;
    return NULL;
}

static int eio_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    int res = fi ? fstat((int)fi->fh, st) : ({
        char p[PATH_MAX];
        real_path(p, path);
        lstat(p, st);
    });
    return res == -1 ? -errno : 0;
}

static int eio_access(const char *path, int mask) {
    char p[PATH_MAX];
    real_path(p, path);
    return access(p, mask) == -1 ? -errno : 0;
}

static int eio_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t offset,
                       struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    (void)offset;
    (void)fi;
    (void)flags;
    char p[PATH_MAX];
    real_path(p, path);
    DIR *dir = opendir(p);
    if (dir == NULL) return -errno;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = entry->d_ino;
        st.st_mode = entry->d_type << 12;
        if (filler(buf, entry->d_name, &st, 0, 0)) break;
    }
    closedir(dir);
    return 0;
}

static int eio_mkdir(const char *path, mode_t mode) {
    char p[PATH_MAX];
    real_path(p, path);
    return mkdir(p, mode) == -1 ? -errno : 0;
}

static int eio_unlink(const char *path) {
    char p[PATH_MAX];
    real_path(p, path);
    return unlink(p) == -1 ? -errno : 0;
}

static int eio_rmdir(const char *path) {
    char p[PATH_MAX];
    real_path(p, path);
    return rmdir(p) == -1 ? -errno : 0;
}

static int eio_rename(const char *from, const char *to, unsigned int flags) {
    if (flags) return -EINVAL;
    if (refused("rename", to)) return -EIO;
    char f[PATH_MAX], t[PATH_MAX];
    real_path(f, from);
    real_path(t, to);
    return rename(f, t) == -1 ? -errno : 0;
}

static int eio_link(const char *from, const char *to) {
    char f[PATH_MAX], t[PATH_MAX];
    real_path(f, from);
    real_path(t, to);
    return link(f, t) == -1 ? -errno : 0;
}

static int eio_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
    int res;
    if (fi) {
        res = fchmod((int)fi->fh, mode);
    } else {
        char p[PATH_MAX];
        real_path(p, path);
        res = chmod(p, mode);
    }
    return res == -1 ? -errno : 0;
}

static int eio_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    if (refused("truncate", path)) return -EIO;
    int res;
    if (fi) {
        res = ftruncate((int)fi->fh, size);
    } else {
        char p[PATH_MAX];
        real_path(p, path);
        res = truncate(p, size);
    }
    return res == -1 ? -errno : 0;
}

static int eio_utimens(const char *path, const struct timespec ts[2], struct fuse_file_info *fi) {
    int res;
    if (fi) {
        res = futimens((int)fi->fh, ts);
    } else {
        char p[PATH_MAX];
        real_path(p, path);
        res = utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
    }
    return res == -1 ? -errno : 0;
}

/* The backing file is opened without O_DIRECT (see the header). */
static int backing_flags(int flags) { return flags & ~O_DIRECT; }

static int eio_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    char p[PATH_MAX];
    real_path(p, path);
    int fd = open(p, backing_flags(fi->flags), mode);
    if (fd == -1) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int eio_open(const char *path, struct fuse_file_info *fi) {
    char p[PATH_MAX];
    real_path(p, path);
    int fd = open(p, backing_flags(fi->flags));
    if (fd == -1) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int eio_read(const char *path, char *buf, size_t size, off_t offset,
                    struct fuse_file_info *fi) {
    held("read", path);
    ssize_t res = pread((int)fi->fh, buf, size, offset);
    return res == -1 ? -errno : (int)res;
}

static int eio_write(const char *path, const char *buf, size_t size, off_t offset,
                     struct fuse_file_info *fi) {
    if (refused("write", path)) return -EIO;
    ssize_t res = pwrite((int)fi->fh, buf, size, offset);
    return res == -1 ? -errno : (int)res;
}

static int eio_statfs(const char *path, struct statvfs *st) {
    char p[PATH_MAX];
    real_path(p, path);
    return statvfs(p, st) == -1 ? -errno : 0;
}

static int eio_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int eio_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    if (refused(datasync ? "fdatasync" : "fsync", path)) return -EIO;
    int res = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
    return res == -1 ? -errno : 0;
}

static int eio_opendir(const char *path, struct fuse_file_info *fi) {
    (void)path;
    (void)fi;
    return 0;
}

static int eio_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)datasync;
    (void)fi;
    if (refused("fsyncdir", path)) return -EIO;
    char p[PATH_MAX];
    real_path(p, path);
    int fd = open(p, O_RDONLY | O_DIRECTORY);
    if (fd == -1) return -errno;
    int res = fsync(fd);
    int saved = errno;
    close(fd);
    return res == -1 ? -saved : 0;
}

static int eio_fallocate(const char *path, int mode, off_t offset, off_t length,
                         struct fuse_file_info *fi) {
    if (refused("fallocate", path)) return -EIO;
    return fallocate((int)fi->fh, mode, offset, length) == -1 ? -errno : 0;
}

static const struct fuse_operations operations = {
    .init = eio_init,
    .getattr = eio_getattr,
    .access = eio_access,
    .readdir = eio_readdir,
    .mkdir = eio_mkdir,
    .unlink = eio_unlink,
    .rmdir = eio_rmdir,
    .rename = eio_rename,
    .link = eio_link,
    .chmod = eio_chmod,
    .truncate = eio_truncate,
    .utimens = eio_utimens,
    .create = eio_create,
    .open = eio_open,
    .read = eio_read,
    .write = eio_write,
    .statfs = eio_statfs,
    .release = eio_release,
    .fsync = eio_fsync,
    .opendir = eio_opendir,
    .fsyncdir = eio_fsyncdir,
    .fallocate = eio_fallocate,
};

int main(int argc, char *argv[]) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s BACKING MOUNTPOINT FAULTY_FOLDER TRIGGER_FILE [HOLD_FILE]\n",
                argv[0]);
        return 2;
    }
    backing = argv[1];
    snprintf(faulty, sizeof faulty, "/%s", argv[3]);
    faulty_len = strlen(faulty);
    trigger = argv[4];
    hold = argc == 6 ? argv[5] : NULL;
    /* Foreground, so the test owns the process; the kernel checks permissions as on the
     * backing folder. */
    char *fuse_argv[] = {argv[0], "-f", "-o", "default_permissions", argv[2], NULL};
    return fuse_main(5, fuse_argv, &operations, NULL);
}
