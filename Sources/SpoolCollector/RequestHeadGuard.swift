import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Bounds what a client can make a connection hold before its request head is read, on the
/// connection's event loop, between NIO's HTTP/1 parser and Hummingbird (one per connection,
/// added through `HTTP1Channel.Configuration.additionalChannelHandlers`).
///
/// - **A head that does not arrive** within ``CollectorConfiguration/headerTimeout`` (counted
///   from when the connection opens, and from the end of each answer that leaves no request
///   unanswered, when the next one may start) closes the connection: a client trickling header bytes (slowloris), or an idle
///   keep-alive connection, holds a socket for that long at most.
/// - **A head past the parser's limits** (a header field or all of them past 80 KiB, which NIO
///   reports as `HTTPParserError.headerOverflow`) is answered 431, and any other request NIO's
///   parser refuses 400, with `Connection: close` and a JSON body saying why. The connection
///   then stops sending, reads and drops what the client still sends (so a client blocked
///   writing a 5 MB header finishes and reads the answer: closing on unread bytes would reset
///   the connection and lose it; Hummingbird's own 400 stopped reading and waited for the
///   client to close), and closes when the client does or ``lingerTime`` has passed. A parse
///   error while a request is in hand (its body) is left to Hummingbird, which answers that
///   request.
///
/// Thread safety: an event-loop-bound channel handler; NIO calls it on its loop only.
final class RequestHeadGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a connection answered 431 keeps reading and dropping before it closes.
    static let lingerTime: TimeAmount = .seconds(5)

    private let headerTimeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var lingering = false
    /// Request heads read and answers ended: the timer runs only while they are equal (no
    /// request read and unanswered, pipelined ones included).
    private var heads = 0
    private var answers = 0

    init(headerTimeout: Duration) {
        self.headerTimeout = .nanoseconds(headerTimeout.wholeNanoseconds)
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
        guard !lingering else { return }
        if case .head = unwrapInboundIn(data) {
            heads += 1
            cancelTimer()
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Lingering, nobody above asks for more: keep the client's bytes flowing to the bin.
        if lingering { context.read() } else { context.fireChannelReadComplete() }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            answers += 1
            if answers == heads { awaitHead(context) }
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if lingering { return }  // the parser's `dataReceivedInErrorState` for each dropped read
        // With a request in hand (a body that does not parse), Hummingbird answers it: two
        // answers must never interleave.
        guard let parserError = error as? HTTPParserError, heads == answers else {
            context.fireErrorCaught(error)
            return
        }
        lingering = true
        cancelTimer()
        let (status, body) = parserError == .headerOverflow
            ? (431, ByteBuffer(string: #"{"error":"the request's headers are larger than this collector accepts (80 KiB per field and in all)"}"#))
            : (400, ByteBuffer(string: #"{"error":"the request is not valid HTTP/1.1"}"#))
        var fields = HTTPFields()
        fields[.connection] = "close"
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.readableBytes)
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .init(code: status), headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            channel.close(mode: .output, promise: nil)
        }
        context.read()
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.lingerTime) {
            channel.close(promise: nil)
        }
    }

    /// Arms the timer for the next request head.
    private func awaitHead(_ context: ChannelHandlerContext) {
        cancelTimer()
        guard !lingering else { return }
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
