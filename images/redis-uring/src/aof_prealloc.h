/* Preallocated AOF: see the DESIGN comment at the top of aof_prealloc.c. */
#ifndef AOF_PREALLOC_H
#define AOF_PREALLOC_H

#include <sys/types.h>

/* flushAppendOnlyFile(), around its write of len bytes at offset (the INCR
 * file's written length) to fd: before it (waits only if the write would
 * pass the zeroed region while the worker is extending it), and after a
 * complete write (the region may be extended in the background). */
void aofPreallocBeforeWrite(int fd, off_t offset, size_t len);
void aofPreallocWritten(int fd, off_t end);
/* Whether [0, end) of fd is written (log and zeros) and fdatasync'ed: fd is
 * the attached file and end is at most its region's end. An overwrite there
 * allocates nothing and changes no size. */
int aofPreallocCovers(int fd, off_t end);
/* Whether fd is the file the preallocator keeps zeros ahead of (whether or
 * not the tail has caught up with them): its page cache is kept. */
int aofPreallocHolds(int fd);
/* Forget fd: the worker stops extending it (waiting for the chunk it is
 * writing); used when the file's length changes behind our back (a short
 * write truncated away). */
void aofPreallocForget(int fd);
/* Before fd is closed, fsync'ed for the last time or read back (rotation,
 * appendonly no, shutdown, DEBUG LOADAOF): forget it and cut the zeroed
 * region off, so the file is the log and nothing else, durably (ftruncate
 * + fdatasync). C_OK, or C_ERR with errno set. */
int aofPreallocTrim(int fd, off_t size);
/* INFO persistence fields (aof_prealloc_*). */
sds aofPreallocInfo(sds info);

#endif
