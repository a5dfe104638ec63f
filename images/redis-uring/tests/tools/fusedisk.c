/* fusedisk: a FUSE passthrough of one directory that behaves like a disk with
 * a volatile write cache and a slow cache flush, for the durability harness
 * and the benchmark's slow-flush volume.
 *
 *   fusedisk BACKING_DIR MOUNTPOINT [-o flush_delay_us=N,write_delay_us=N,cut_done=PATH] [fuse options]
 *
 * Flush latency. Every fsync/fdatasync (of a file or a directory) holds "the
 * device" for flush_delay_us, one flush at a time: a volume whose cache flush
 * is slow and serial, like an EBS gp3 volume (about 1-2 ms). write_delay_us is
 * added to every write (EBS also slows writes; 0 by default). A loop device
 * whose backing file lives here turns ext4's cache flushes and FUA writes into
 * fsyncs of that file, so an ext4 on it pays the delay in every mode alike:
 * the delay sits under the filesystem, not inside any engine.
 *
 * Volatile write cache. A write is durable once an fsync of its file
 * returns, and not before. Before a write overwrites bytes the last fsync
 * made durable, the page's durable content is saved; the size at the last
 * fsync is the durable size. SIGUSR1 is the power cut: every file goes back
 * to what its last fsync made durable (saved pages restored, the size cut
 * back), every later operation fails with EIO, and the file named by
 * cut_done is created once that is done. Unmount and mount again to
 * "reboot". What an application acknowledged without an fsync reaching the
 * device is gone after the cut, although the backing file sits on a host
 * filesystem that never crashed.
 *
 * Like LazyFS, and like FUSE filesystems that make data durable at fsync
 * only, it ignores the O_DSYNC the kernel sets in a write request for an
 * O_DSYNC descriptor or an RWF_DSYNC write. The kernel follows a synchronous
 * such write with an fsync, but not an asynchronous direct write (io_uring,
 * AIO) inside the file's size: here that write is lost at the cut.
 *
 * What it does not model. The namespace (create, rename, unlink) is durable
 * at once, and so is a size change by truncate or fallocate, together with
 * the file's earlier writes (as ext4's ordered mode commits them): metadata
 * ordering is the filesystem's job, covered by the harness' EXT4_IOC_SHUTDOWN
 * cut. A flush makes the file's writes durable when it takes
 * the device, not when it returns (a device may persist early; an
 * acknowledgement waits for the return either way). Flushes of
 * different files are serial (one device). This program lets writes
 * proceed during a flush, but the kernel's FUSE client holds a file's inode
 * lock through its fsync: a loop device over one image file writes nothing
 * while the image is flushed, and a read it queued behind a write waits too
 * (a real volume may overlap them).
 * The backing file is never fsync'ed itself: its durability is the host's,
 * and the power cut is this program's.
 *
 * Build: cc -O2 -o fusedisk fusedisk.c $(pkg-config --cflags --libs fuse3)
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static struct {
    char *backing;
    long flush_delay_us, write_delay_us;
    char *cut_done;
} opt;

static char root[4096];

static const struct fuse_opt opt_spec[] = {
    {"flush_delay_us=%ld", offsetof(__typeof__(opt), flush_delay_us), 0},
    {"write_delay_us=%ld", offsetof(__typeof__(opt), write_delay_us), 0},
    {"cut_done=%s", offsetof(__typeof__(opt), cut_done), 0},
    FUSE_OPT_END,
};

/* The durable image of one file: its size at the last fsync, and the durable
 * content of every page below that size written since (an open-addressing
 * table keyed by page index). */
struct saved {
    off_t page; /* -1: empty slot */
    char *data;
};
struct file {
    struct file *next;
    dev_t dev;
    ino_t ino;
    int fd;
    off_t durable_size;
    struct saved *pages;
    size_t npages, cap;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;       /* files and dead */
static pthread_mutex_t device = PTHREAD_MUTEX_INITIALIZER;     /* one flush at a time */
static struct file *files;
static int dead;

static void path_of(char *out, const char *p) { snprintf(out, 4096, "%s%s", root, p); }

static void pause_us(long us) {
    if (us <= 0) return;
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {}
}

static void drop_pages(struct file *f) {
    for (size_t i = 0; i < f->cap; i++) free(f->pages[i].data);
    free(f->pages);
    f->pages = NULL;
    f->npages = f->cap = 0;
}

/* The tracked file for fd's inode, created (durable as it is now) on first use. */
static struct file *file_of(int fd) {
    struct stat st;
    if (fstat(fd, &st) == -1) return NULL;
    for (struct file *f = files; f; f = f->next)
        if (f->dev == st.st_dev && f->ino == st.st_ino) return f;
    struct file *f = calloc(1, sizeof(*f));
    if (!f) return NULL;
    /* Its own descriptor, readable (the handle may be write-only) and open
     * until the file's last name goes. */
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    f->fd = open(self, O_RDWR | O_CLOEXEC);
    if (f->fd == -1) {
        free(f);
        return NULL;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->durable_size = st.st_size;
    f->next = files;
    files = f;
    return f;
}

/* Forget the file at path if its last name goes: nothing to restore. */
static void forget_if_last_link(const char *path) {
    struct stat st;
    if (lstat(path, &st) == -1 || st.st_nlink > 1) return;
    for (struct file **pp = &files; *pp; pp = &(*pp)->next) {
        struct file *f = *pp;
        if (f->dev == st.st_dev && f->ino == st.st_ino) {
            *pp = f->next;
            drop_pages(f);
            close(f->fd);
            free(f);
            return;
        }
    }
}

static struct saved *slot(struct file *f, off_t page) {
    size_t mask = f->cap - 1, i = (size_t)page * 11400714819323198485ull & mask;
    while (f->pages[i].page != -1 && f->pages[i].page != page) i = (i + 1) & mask;
    return &f->pages[i];
}

static int grow(struct file *f) {
    size_t cap = f->cap ? f->cap * 2 : 64;
    struct saved *old = f->pages, *n = malloc(cap * sizeof(*n));
    if (!n) return -1;
    for (size_t i = 0; i < cap; i++) n[i] = (struct saved){-1, NULL};
    size_t ocap = f->cap;
    f->pages = n;
    f->cap = cap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].page != -1) *slot(f, old[i].page) = old[i];
    free(old);
    return 0;
}

/* Save the durable content of the pages [off, off+len) overlaps below the
 * durable size, unless saved since the last flush. */
static int save_before_write(struct file *f, off_t off, size_t len) {
    if (off >= f->durable_size || len == 0) return 0;
    off_t last = (off + (off_t)len - 1) / PAGE;
    for (off_t p = off / PAGE; p <= last && p * PAGE < f->durable_size; p++) {
        if ((f->npages + 1) * 2 > f->cap && grow(f) == -1) return -ENOMEM;
        struct saved *s = slot(f, p);
        if (s->page == p) continue;
        char *data = calloc(1, PAGE);
        if (!data) return -ENOMEM;
        if (pread(f->fd, data, PAGE, p * PAGE) == -1) {
            int e = errno;
            free(data);
            return -e;
        }
        *s = (struct saved){p, data};
        f->npages++;
    }
    return 0;
}

/* Everything written to f so far is durable. */
static void commit(struct file *f) {
    struct stat st;
    drop_pages(f);
    if (fstat(f->fd, &st) == 0) f->durable_size = st.st_size;
}

/* The power cut: every file back to its durable image. */
static void cut(void) {
    pthread_mutex_lock(&lock);
    dead = 1;
    for (struct file *f = files; f; f = f->next) {
        for (size_t i = 0; i < f->cap; i++) {
            struct saved *s = &f->pages[i];
            if (s->page == -1) continue;
            off_t n = f->durable_size - s->page * PAGE;
            if (pwrite(f->fd, s->data, n < PAGE ? (size_t)n : PAGE, s->page * PAGE) == -1)
                fprintf(stderr, "fusedisk: restoring a page: %s\n", strerror(errno));
        }
        if (ftruncate(f->fd, f->durable_size) == -1) fprintf(stderr, "fusedisk: truncating: %s\n", strerror(errno));
        drop_pages(f);
    }
    pthread_mutex_unlock(&lock);
    if (opt.cut_done) {
        int fd = open(opt.cut_done, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd != -1) close(fd);
    }
    fprintf(stderr, "fusedisk: power cut: unflushed writes dropped\n");
}

static void *signals(void *arg) {
    sigset_t *set = arg;
    int sig;
    while (sigwait(set, &sig) == 0)
        if (sig == SIGUSR1) cut();
    return NULL;
}

static int is_dead(void) {
    pthread_mutex_lock(&lock);
    int d = dead;
    pthread_mutex_unlock(&lock);
    return d;
}

#define ALIVE()                          \
    do {                                 \
        if (is_dead()) return -EIO;      \
    } while (0)

/* fsync/fdatasync: the file's writes become durable when the flush takes the
 * device; the device is then busy for the flush delay. */
static int flush(int fd) {
    pthread_mutex_lock(&device);
    pthread_mutex_lock(&lock);
    int r = dead ? -EIO : 0;
    if (!r && fd != -1) {
        struct file *f = file_of(fd);
        if (f) commit(f);
        else r = -errno;
    }
    pthread_mutex_unlock(&lock);
    if (!r) pause_us(opt.flush_delay_us);
    pthread_mutex_unlock(&device);
    return r;
}

static int fd_getattr(const char *p, struct stat *st, struct fuse_file_info *fi) {
    ALIVE();
    if (fi) return fstat((int)fi->fh, st) ? -errno : 0;
    char r[4096];
    path_of(r, p);
    return lstat(r, st) ? -errno : 0;
}

static int fd_readdir(const char *p, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags fl) {
    (void)off, (void)fi, (void)fl;
    ALIVE();
    char r[4096];
    path_of(r, p);
    DIR *d = opendir(r);
    if (!d) return -errno;
    struct dirent *e;
    while ((e = readdir(d))) fill(buf, e->d_name, NULL, 0, 0);
    closedir(d);
    return 0;
}

static int fd_open(const char *p, struct fuse_file_info *fi) {
    ALIVE();
    char r[4096];
    path_of(r, p);
    int fd = open(r, fi->flags & ~(O_DIRECT | O_SYNC | O_DSYNC));
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int fd_create(const char *p, mode_t m, struct fuse_file_info *fi) {
    ALIVE();
    char r[4096];
    path_of(r, p);
    int fd = open(r, (fi->flags & ~(O_DIRECT | O_SYNC | O_DSYNC)) | O_CREAT, m);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int fd_read(const char *p, char *b, size_t n, off_t o, struct fuse_file_info *fi) {
    (void)p;
    ALIVE();
    ssize_t r = pread((int)fi->fh, b, n, o);
    return r < 0 ? -errno : (int)r;
}

static int fd_write(const char *p, const char *b, size_t n, off_t o, struct fuse_file_info *fi) {
    (void)p;
    pause_us(opt.write_delay_us);
    pthread_mutex_lock(&lock);
    int r = dead ? -EIO : 0;
    if (!r) {
        struct file *f = file_of((int)fi->fh);
        r = f ? save_before_write(f, o, n) : -errno;
        if (!r) {
            ssize_t w = pwrite((int)fi->fh, b, n, o);
            r = w < 0 ? -errno : (int)w;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static int fd_fsync(const char *p, int datasync, struct fuse_file_info *fi) {
    (void)p, (void)datasync;
    return flush((int)fi->fh);
}

static int fd_fsyncdir(const char *p, int datasync, struct fuse_file_info *fi) {
    (void)p, (void)datasync, (void)fi;
    return flush(-1);
}

static int fd_release(const char *p, struct fuse_file_info *fi) {
    (void)p;
    close((int)fi->fh);
    return 0;
}

/* A size change by truncate or fallocate is durable at once, with the file's
 * earlier writes (see "What it does not model"). */
static int resized(int fd, int err) {
    pthread_mutex_lock(&lock);
    struct file *f = err ? NULL : file_of(fd);
    if (f) commit(f);
    pthread_mutex_unlock(&lock);
    return err ? err : f ? 0 : -EIO;
}

static int resize(int fd, off_t size) {
    ALIVE();
    return resized(fd, ftruncate(fd, size) ? -errno : 0);
}

static int fd_truncate(const char *p, off_t s, struct fuse_file_info *fi) {
    if (fi) return resize((int)fi->fh, s);
    char r[4096];
    path_of(r, p);
    int fd = open(r, O_WRONLY);
    if (fd < 0) return -errno;
    int e = resize(fd, s);
    close(fd);
    return e;
}

static int fd_fallocate(const char *p, int mode, off_t o, off_t l, struct fuse_file_info *fi) {
    (void)p;
    ALIVE();
    if (mode) return -EOPNOTSUPP; /* Punching or zeroing ranges is not modelled. */
    return resized((int)fi->fh, fallocate((int)fi->fh, 0, o, l) ? -errno : 0);
}

static int fd_unlink(const char *p) {
    ALIVE();
    char r[4096];
    path_of(r, p);
    pthread_mutex_lock(&lock);
    forget_if_last_link(r);
    int e = unlink(r) ? -errno : 0;
    pthread_mutex_unlock(&lock);
    return e;
}

static int fd_rename(const char *a, const char *b, unsigned int fl) {
    if (fl) return -EINVAL;
    ALIVE();
    char ra[4096], rb[4096];
    path_of(ra, a);
    path_of(rb, b);
    pthread_mutex_lock(&lock);
    forget_if_last_link(rb);
    int e = rename(ra, rb) ? -errno : 0;
    pthread_mutex_unlock(&lock);
    return e;
}

static int fd_mkdir(const char *p, mode_t m) {
    ALIVE();
    char r[4096];
    path_of(r, p);
    return mkdir(r, m) ? -errno : 0;
}

static int fd_rmdir(const char *p) {
    ALIVE();
    char r[4096];
    path_of(r, p);
    return rmdir(r) ? -errno : 0;
}

static int fd_chmod(const char *p, mode_t m, struct fuse_file_info *fi) {
    ALIVE();
    if (fi) return fchmod((int)fi->fh, m) ? -errno : 0;
    char r[4096];
    path_of(r, p);
    return chmod(r, m) ? -errno : 0;
}

static int fd_chown(const char *p, uid_t u, gid_t g, struct fuse_file_info *fi) {
    ALIVE();
    if (fi) return fchown((int)fi->fh, u, g) ? -errno : 0;
    char r[4096];
    path_of(r, p);
    return lchown(r, u, g) ? -errno : 0;
}

static int fd_utimens(const char *p, const struct timespec tv[2], struct fuse_file_info *fi) {
    ALIVE();
    if (fi) return futimens((int)fi->fh, tv) ? -errno : 0;
    char r[4096];
    path_of(r, p);
    return utimensat(AT_FDCWD, r, tv, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int fd_statfs(const char *p, struct statvfs *s) {
    (void)p;
    ALIVE();
    return statvfs(root, s) ? -errno : 0;
}

static void *fd_init(struct fuse_conn_info *c, struct fuse_config *cfg) {
    /* Writes reach this program as the application makes them: no kernel
     * writeback cache in front of the modelled one. */
    c->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    cfg->use_ino = 1;
    cfg->attr_timeout = 1;
    cfg->entry_timeout = 1;
    return NULL;
}

static const struct fuse_operations ops = {
    .init = fd_init,         .getattr = fd_getattr, .readdir = fd_readdir,   .open = fd_open,
    .create = fd_create,     .read = fd_read,       .write = fd_write,       .fsync = fd_fsync,
    .fsyncdir = fd_fsyncdir, .release = fd_release, .truncate = fd_truncate, .fallocate = fd_fallocate,
    .unlink = fd_unlink,     .rename = fd_rename,   .mkdir = fd_mkdir,       .rmdir = fd_rmdir,
    .chmod = fd_chmod,       .chown = fd_chown,     .utimens = fd_utimens,   .statfs = fd_statfs,
};

static int take_backing(void *data, const char *arg, int key, struct fuse_args *out) {
    (void)data, (void)out;
    if (key == FUSE_OPT_KEY_NONOPT && !opt.backing) {
        opt.backing = strdup(arg);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    if (fuse_opt_parse(&args, &opt, opt_spec, take_backing) == -1) return 2;
    if (!opt.backing || !realpath(opt.backing, root)) {
        fprintf(stderr, "usage: %s BACKING_DIR MOUNTPOINT [-o flush_delay_us=N,write_delay_us=N,cut_done=PATH]\n",
                argv[0]);
        return 2;
    }
    /* SIGUSR1 goes to the signal thread only: block it before FUSE's threads start. */
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, signals, &set) != 0) return 1;
    int r = fuse_main(args.argc, args.argv, &ops, NULL);
    fuse_opt_free_args(&args);
    return r;
}
