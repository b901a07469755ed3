#ifndef CFERRY_CURL_SHIM_H
#define CFERRY_CURL_SHIM_H
// Typed, non-variadic wrappers around curl_easy_setopt / curl_easy_getinfo,
// which Swift cannot call because they are C variadic functions.
#include <curl/curl.h>

CURLcode ferry_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode ferry_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value);
CURLcode ferry_curl_setopt_ptr(CURL *handle, CURLoption option, const void *value);
CURLcode ferry_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode ferry_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode ferry_curl_setopt_write_function(CURL *handle,
    size_t (*fn)(char *, size_t, size_t, void *));
CURLcode ferry_curl_setopt_read_function(CURL *handle,
    size_t (*fn)(char *, size_t, size_t, void *));
CURLcode ferry_curl_setopt_header_function(CURL *handle,
    size_t (*fn)(char *, size_t, size_t, void *));
CURLcode ferry_curl_setopt_seek_function(CURL *handle, int (*fn)(void *, curl_off_t, int));
CURLcode ferry_curl_setopt_opensocket_function(CURL *handle,
    curl_socket_t (*fn)(void *, curlsocktype, struct curl_sockaddr *));
CURLcode ferry_curl_setopt_xferinfo_function(CURL *handle,
    int (*fn)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t));
CURLcode ferry_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode ferry_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value);
CURLcode ferry_curl_getinfo_string(CURL *handle, CURLINFO info, char **value);

// curl_multi_setopt is variadic too.
CURLMcode ferry_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
// The next finished transfer of `multi` (1), or none left (0): CURLMsg's union, read in C.
int ferry_curl_multi_next_done(CURLM *multi, CURL **easy, CURLcode *result);
CURLMcode ferry_curl_multi_setopt_ptr(CURLM *multi, CURLMoption option, void *value);
CURLMcode ferry_curl_multi_setopt_socket_function(CURLM *multi, int (*fn)(CURL *, curl_socket_t, int, void *, void *));
CURLMcode ferry_curl_multi_setopt_timer_function(CURLM *multi, int (*fn)(CURLM *, long, void *));

// epoll for the event loop, in C: struct epoll_event is packed on x86-64.
// Watches `fd` for reading and/or writing (add or change); 0 on success.
int ferry_epoll_watch(int epfd, int fd, int readable, int writable, int add);
int ferry_epoll_unwatch(int epfd, int fd);
int ferry_epoll_create(void);      // close-on-exec
int ferry_eventfd(void);           // non-blocking, close-on-exec
// Waits up to `timeout_ms`; fills up to `max` (at most 64) ready fds and their
// CURL_CSELECT_* flags; returns how many, or -1 (errno).
int ferry_epoll_wait(int epfd, int *fds, int *flags, int max, int timeout_ms);

#endif
