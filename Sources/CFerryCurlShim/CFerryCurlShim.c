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
