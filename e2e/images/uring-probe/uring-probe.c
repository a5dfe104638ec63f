/* uring-probe DIR: prove io_uring works here the way the io_uring AOF uses it.
 *
 * Sets up a ring, submits a write at an explicit offset linked to an fdatasync of a
 * file in DIR, and checks both completions. Prints one line and exits 0 on success;
 * on failure prints the failing step and the errno name (e.g. "io_uring_setup: EPERM"
 * under a seccomp profile that denies it) and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *step, int err) {
  printf("%s: %s (%s)\n", step, strerrorname_np(err), strerror(err));
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/uring-probe.dat", argv[1]);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return fail("open", errno);

  struct io_uring ring;
  int ret = io_uring_queue_init(8, &ring, 0);
  if (ret < 0)
    return fail("io_uring_setup", -ret);

  static const char payload[] = "written through io_uring\n";
  struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
  io_uring_prep_write(sqe, fd, payload, sizeof payload - 1, 0);
  sqe->flags |= IOSQE_IO_LINK;
  sqe = io_uring_get_sqe(&ring);
  io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);

  ret = io_uring_submit_and_wait(&ring, 2);
  if (ret < 0) {
    io_uring_queue_exit(&ring);
    return fail("io_uring_enter", -ret);
  }
  int status = 0;
  for (int i = 0; i < 2; i++) {
    struct io_uring_cqe *cqe;
    ret = io_uring_wait_cqe(&ring, &cqe);
    if (ret < 0) {
      status = fail("io_uring_wait_cqe", -ret);
      break;
    }
    if (cqe->res < 0)
      status = fail(i == 0 ? "write" : "fdatasync", -cqe->res);
    io_uring_cqe_seen(&ring, cqe);
  }
  io_uring_queue_exit(&ring);
  close(fd);
  if (status == 0)
    printf("io_uring: write+fdatasync ok (%s)\n", path);
  return status;
}
