// Plain-HTTP connections served by our own loop around httplib's request handling.
//
// httplib 0.11 reads each request through a stream it makes per request, with a 4 KB read-ahead
// buffer that dies with it: a client that pipelines (sends its next request before the answer)
// loses every request after the first, and waits out the 5 s keep-alive for nothing. This server
// keeps one buffered stream per connection, so pipelined requests are answered in order.
// Everything else (parsing, routing, keep-alive limits and timeouts) is httplib's, through its
// protected process_request. HTTPS connections stay with httplib::SSLServer.
#pragma once

#include <httplib.h>

namespace gapless::server {

class PlainHttpServer : public httplib::Server {
 private:
  // Overrides httplib's (private virtual) per-connection function; runs on a pool thread.
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace gapless::server
