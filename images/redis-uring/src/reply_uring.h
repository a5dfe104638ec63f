#ifndef REPLY_URING_H
#define REPLY_URING_H

/* Client replies through io_uring (io-uring-replies); see reply_uring.c. */

struct client;

int replyUringUpdate(const char **err);
void replyUringStart(void);
int replyUringQueue(struct client *c);
void replyUringFlush(void);
sds replyUringInfo(sds info);

#endif
