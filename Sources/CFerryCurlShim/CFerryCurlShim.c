#define _GNU_SOURCE
#include "CFerryCurlShim.h"

CURLcode ferry_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
CURLcode ferry_curl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
CURLcode ferry_curl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
CURLcode ferry_curl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
CURLcode ferry_curl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
CURLcode ferry_curl_setopt_write_function(CURL *h, size_t (*fn)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fn);
}
CURLcode ferry_curl_setopt_read_function(CURL *h, size_t (*fn)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_READFUNCTION, fn);
}
CURLcode ferry_curl_setopt_header_function(CURL *h, size_t (*fn)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, fn);
}
CURLcode ferry_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
CURLcode ferry_curl_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
CURLcode ferry_curl_setopt_seek_function(CURL *h, int (*fn)(void *, curl_off_t, int)) {
    return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, fn);
}
CURLcode ferry_curl_setopt_opensocket_function(CURL *h, curl_socket_t (*fn)(void *, curlsocktype, struct curl_sockaddr *)) {
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, fn);
}
CURLcode ferry_curl_setopt_xferinfo_function(CURL *h, int (*fn)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, fn);
}
CURLcode ferry_curl_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }

CURLMcode ferry_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

int ferry_curl_multi_next_done(CURLM *m, CURL **easy, CURLcode *result) {
    int left = 0;
    CURLMsg *message;
    while ((message = curl_multi_info_read(m, &left)) != NULL) {
        if (message->msg == CURLMSG_DONE) {
            *easy = message->easy_handle;
            *result = message->data.result;
            return 1;
        }
    }
    return 0;
}

CURLMcode ferry_curl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
CURLMcode ferry_curl_multi_setopt_socket_function(CURLM *m, int (*fn)(CURL *, curl_socket_t, int, void *, void *)) {
    return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, fn);
}
CURLMcode ferry_curl_multi_setopt_timer_function(CURLM *m, int (*fn)(CURLM *, long, void *)) {
    return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, fn);
}

#include <sys/epoll.h>
#include <errno.h>

int ferry_epoll_watch(int epfd, int fd, int readable, int writable, int add) {
    struct epoll_event event = {0};
    event.events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);
    event.data.fd = fd;
    int rc = epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event);
    if (rc != 0 && add && errno == EEXIST) rc = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event);
    if (rc != 0 && !add && errno == ENOENT) rc = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
    return rc;
}

int ferry_epoll_unwatch(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int ferry_epoll_wait(int epfd, int *fds, int *flags, int max, int timeout_ms) {
    struct epoll_event events[64];
    if (max > 64) max = 64;
    int n = epoll_wait(epfd, events, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        fds[i] = events[i].data.fd;
        int f = 0;
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) f |= CURL_CSELECT_IN;
        if (events[i].events & EPOLLOUT) f |= CURL_CSELECT_OUT;
        if (events[i].events & EPOLLERR) f |= CURL_CSELECT_ERR;
        flags[i] = f;
    }
    return n;
}

#include <sys/eventfd.h>
int ferry_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
int ferry_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
