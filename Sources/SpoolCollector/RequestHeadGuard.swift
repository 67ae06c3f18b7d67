import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Bounds what a client can make a connection hold around its requests' heads and unread
/// bodies, on the connection's event loop, between NIO's HTTP/1 parser and Hummingbird (one per
/// connection, added through `HTTP1Channel.Configuration.additionalChannelHandlers`).
///
/// - **A head that does not arrive** within ``CollectorConfiguration/headerTimeout`` (counted
///   from when the connection opens, and from the end of each answer that leaves no request
///   unanswered, when the next one may start) closes the connection: a client trickling header
///   bytes (slowloris), or an idle keep-alive connection, holds a socket for that long at most.
/// - **A head past the parser's limits** (a header field or all of them past 80 KiB, which NIO
///   reports as `HTTPParserError.headerOverflow`) is answered 431, and any other request NIO's
///   parser refuses 400, with `Connection: close` and a JSON body saying why; each is counted
///   as a request (`refused`). A parse error while a request is in hand (its body) is left to
///   Hummingbird, which answers that request.
/// - **An answer that leaves more than ``drainLimit`` bytes of its request's body unread**, or
///   more than ``CollectorConfiguration/maxBodyBytes`` (a
///   401, 413, 408, 501 or 503 given before the body arrived; a chunked body counts as
///   unbounded) says `Connection: close`, and the connection is closed after it instead of
///   reading the rest of the body to reach the next request (Hummingbird would read it all, a
///   10^12-byte `Content-Length` included, until a timer ended the connection). A smaller rest
///   is read and dropped, and the connection kept.
///
/// A connection that closes after an answer lingers: it stops sending, reads and drops what
/// the client still sends (so a client blocked writing finishes and reads the answer: closing
/// on unread bytes would reset the connection and could lose it), and closes when the client
/// does, after ``lingerReads`` reads, or after ``lingerTime``, whichever comes first.
///
/// Thread safety: an event-loop-bound channel handler; NIO calls it on its loop only.
final class RequestHeadGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a closing connection keeps reading and dropping before it closes.
    static let lingerTime: TimeAmount = .seconds(5)
    /// How many reads (or parsed body parts, which are no larger) a closing connection drops
    /// before it closes: NIO reads at most 64 KiB at a time, so at most 16 MiB, about what a
    /// client can have in flight on a fast link.
    static let lingerReads = 256
    /// The most bytes of a request's body an answer may leave unread and the connection still
    /// be kept (when ``CollectorConfiguration/maxBodyBytes`` is no smaller): they are read and
    /// dropped to reach the next request.
    static let drainLimit = 64 * 1024

    private let headerTimeout: TimeAmount
    /// The most unread body bytes drained: ``drainLimit``, or less with a smaller body limit.
    private let drained: Int
    private let refused: @Sendable () -> Void
    private var timer: Scheduled<Void>?
    /// Reads dropped since the connection began to linger; nil while it does not.
    private var lingered: Int?
    /// Request heads read and answers ended: the timer runs only while they are equal (no
    /// request read and unanswered, pipelined ones included).
    private var heads = 0
    private var answers = 0
    /// The body of the last request read: whether its end has yet to arrive, and how many of
    /// its declared bytes have not (nil when it declared none: chunked).
    private var bodyOpen = false
    private var bodyUnread: Int?
    /// Whether the answer being written ends the connection.
    private var closing = false

    /// - Parameters:
    ///   - headerTimeout: ``CollectorConfiguration/headerTimeout``.
    ///   - maxBodyBytes: ``CollectorConfiguration/maxBodyBytes``.
    ///   - refused: called for each request this handler answers itself (400 or 431).
    init(headerTimeout: Duration, maxBodyBytes: Int, refused: @escaping @Sendable () -> Void) {
        self.headerTimeout = .nanoseconds(headerTimeout.wholeNanoseconds)
        self.drained = min(Self.drainLimit, maxBodyBytes)
        self.refused = refused
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { awaitHead(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
    }

    func channelActive(context: ChannelHandlerContext) {
        awaitHead(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimer()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if lingered != nil { return dropped(context) }
        switch unwrapInboundIn(data) {
        case .head(let head):
            heads += 1
            cancelTimer()
            bodyOpen = true
            bodyUnread = head.headerFields[.transferEncoding] == nil ? Int(head.headerFields[.contentLength] ?? "0") : nil
        case .body(let buffer):
            bodyUnread = bodyUnread.map { $0 - buffer.readableBytes }
        case .end:
            bodyOpen = false
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client closed its side while the connection lingers: nothing is left to wait for.
        if lingered != nil, case ChannelEvent.inputClosed? = event as? ChannelEvent {
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Lingering, nobody above asks for more: keep the client's bytes flowing to the bin.
        if lingered != nil { context.read() } else { context.fireChannelReadComplete() }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where leavesTooMuchUnread:
            closing = true
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end where closing:
            answers += 1
            linger(context, after: data, promise: promise)
        case .end:
            answers += 1
            if answers == heads { awaitHead(context) }
            context.write(data, promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }

    /// Whether the answer now written is to the last request read, and leaves more of its body
    /// unread than is drained.
    private var leavesTooMuchUnread: Bool {
        heads == answers + 1 && bodyOpen && (bodyUnread ?? .max) > drained
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if lingered != nil { return dropped(context) }  // the parser's `dataReceivedInErrorState`
        // With a request in hand (a body that does not parse), Hummingbird answers it: two
        // answers must never interleave.
        guard let parserError = error as? HTTPParserError, heads == answers else {
            context.fireErrorCaught(error)
            return
        }
        refused()
        let (status, body) = parserError == .headerOverflow
            ? (431, ByteBuffer(string: #"{"error":"the request's headers are larger than this collector accepts (80 KiB per field and in all)"}"#))
            : (400, ByteBuffer(string: #"{"error":"the request is not valid HTTP/1.1"}"#))
        var fields = HTTPFields()
        fields[.connection] = "close"
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.readableBytes)
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .init(code: status), headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        linger(context, after: wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// Writes `end` (the last part of an answer), stops sending once it is out, and drops what
    /// the client still sends until it closes, ``lingerReads`` reads or ``lingerTime``.
    private func linger(_ context: ChannelHandlerContext, after end: NIOAny, promise: EventLoopPromise<Void>?) {
        lingered = 0
        cancelTimer()
        let channel = context.channel
        context.writeAndFlush(end).assumeIsolated().whenComplete { result in
            promise?.completeWith(result)
            channel.close(mode: .output, promise: nil)
        }
        context.read()
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.lingerTime) {
            channel.close(promise: nil)
        }
    }

    /// Counts a read dropped while lingering; past ``lingerReads``, closes.
    private func dropped(_ context: ChannelHandlerContext) {
        lingered? += 1
        if let lingered, lingered > Self.lingerReads { context.close(promise: nil) }
    }

    /// Arms the timer for the next request head.
    private func awaitHead(_ context: ChannelHandlerContext) {
        cancelTimer()
        guard lingered == nil else { return }
        let channel = context.channel
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: headerTimeout) {
            channel.close(promise: nil)
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }
}
