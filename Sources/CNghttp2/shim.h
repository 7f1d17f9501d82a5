// libnghttp2's public API, exposed to Swift as one module.
#include <nghttp2/nghttp2.h>
