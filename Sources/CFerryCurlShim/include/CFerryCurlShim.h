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

#endif
