// strandline's Java client program: Apache Kafka's own client (kafka-clients) driven over a line
// protocol, so that strandline's controller can journal what the official client does.
//
// One JVM serves many client slots. The controller writes one JSON request per line on stdin and
// reads one JSON reply per line on stdout, matched by "id"; replies come in the order operations
// finish, not in the order they were asked. Every client (a producer, a transactional producer,
// a consumer) has a number the controller chose and a thread of its own, which runs that
// client's operations one at a time (a KafkaConsumer must only be used from one thread); the
// sends of a plain producer, which is thread-safe, run on a shared pool, so that a send waiting
// for metadata holds up no other slot. This program decides nothing about outcomes: a reply is
// the result, or the exception (its class, message, Kafka error code and, for a send, whether
// the record reached the producer's buffer); the controller maps it to ok/fail/info
// (workloads/clients/java.py). The settings come from the controller as Kafka properties.
//
// Requests: {"id", "op": "hello"}; {"id", "op": "producer" | "consumer", "client", "props",
// "transactional"}; then {"id", "op", "client", ...} with op one of send, begin, commit_txn,
// abort_txn (producers), assign, poll, positions, consumed_positions, end_offsets, subscribe,
// commit (consumers), close (both).
// Replies: {"id", "ok": true, ...result} or {"id", "ok": false, "class", "error", "code",
// "appended"}; a group member's replies carry "rebalances": what its rebalance listener heard.
//
// When stdin closes (the controller exited or was killed) the program halts at once, as a
// crash would: no client is closed, no group is left, nothing in flight is flushed.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class StrandlineClients {
    private static final BlockingQueue<String> REPLIES = new LinkedBlockingQueue<>();
    private static final Map<Long, Client> CLIENTS = new ConcurrentHashMap<>();
    private static final ExecutorService SENDS = Executors.newCachedThreadPool(threads("send"));

    private StrandlineClients() {}

    public static void main(String[] args) throws IOException {
        OutputStream stdout = new FileOutputStream(FileDescriptor.out);
        System.setOut(System.err); // nothing but replies may reach the controller's pipe
        Thread writer = new Thread(() -> writeReplies(stdout), "replies");
        writer.setDaemon(true);
        writer.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.isEmpty()) {
                serve(line);
            }
        }
        Runtime.getRuntime().halt(0);
    }

    private static void serve(String line) {
        Map<String, Object> request;
        try {
            request = Json.object(line);
        } catch (RuntimeException e) {
            System.err.println("strandline-java: unreadable request: " + e.getMessage());
            return;
        }
        long id = Json.number(request, "id");
        try {
            String op = Json.string(request, "op");
            if (op.equals("hello")) {
                REPLIES.add(ok(id).add("version", clientVersion())
                        .add("java", System.getProperty("java.version")).end());
                return;
            }
            long number = Json.number(request, "client");
            if (op.equals("producer") || op.equals("consumer")) {
                Client client = op.equals("producer")
                        ? new ProducerClient(number, Boolean.TRUE.equals(request.get("transactional")))
                        : new ConsumerClient(number);
                if (CLIENTS.putIfAbsent(number, client) != null) {
                    throw new IllegalStateException("client " + number + " exists already");
                }
                client.make(id, properties(request.get("props")));
                return;
            }
            Client client = CLIENTS.get(number);
            if (client == null) {
                throw new IllegalStateException("no client " + number + " (closed, or never made)");
            }
            client.handle(id, op, request);
        } catch (RuntimeException e) {
            REPLIES.add(error(id, e, null, ""));
        }
    }

    /** The kafka-clients release on the class path, as its jar records it. */
    private static String clientVersion() {
        Properties props = new Properties();
        try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                props.load(in);
            }
        } catch (IOException e) {
            return "unknown";
        }
        return props.getProperty("version", "unknown");
    }

    private static void writeReplies(OutputStream stdout) {
        List<String> batch = new ArrayList<>();
        try {
            while (true) {
                batch.add(REPLIES.take());
                REPLIES.drainTo(batch);
                StringBuilder text = new StringBuilder();
                for (String reply : batch) {
                    text.append(reply).append('\n');
                }
                batch.clear();
                stdout.write(text.toString().getBytes(StandardCharsets.UTF_8));
                stdout.flush();
            }
        } catch (IOException | InterruptedException e) {
            Runtime.getRuntime().halt(0); // the controller's end of the pipe is gone
        }
    }

    private static Properties properties(Object props) {
        Properties result = new Properties();
        if (props instanceof Map) {
            for (Map.Entry<?, ?> e : ((Map<?, ?>) props).entrySet()) {
                result.put(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
            }
        }
        return result;
    }

    private static ThreadFactory threads(String prefix) {
        return r -> {
            Thread t = new Thread(r, prefix);
            t.setDaemon(true);
            return t;
        };
    }

    // --- replies ------------------------------------------------------------------------------

    static Reply ok(long id) {
        return new Reply(id, true);
    }

    /** The exception as the controller needs it; `appended` is null where it does not apply. */
    static String error(long id, Throwable e, Boolean appended, String rebalances) {
        Reply reply = new Reply(id, false).add("class", e.getClass().getName()).add("error", describe(e))
                .add("code", Errors.forException(e).code());
        if (appended != null) {
            reply.add("appended", appended);
        }
        return reply.raw(rebalances).end();
    }

    static String describe(Throwable e) {
        String text = name(e);
        Throwable cause = e.getCause();
        if (cause != null && cause != e) {
            text += " (caused by " + name(cause) + ")";
        }
        return text;
    }

    private static String name(Throwable e) {
        String message = e.getMessage();
        String simple = e.getClass().getSimpleName();
        return message == null || message.isEmpty() ? simple : simple + ": " + message;
    }

    /** One JSON object, written field by field. */
    static final class Reply {
        private final StringBuilder text = new StringBuilder(64);

        Reply(long id, boolean ok) {
            text.append("{\"id\":").append(id).append(",\"ok\":").append(ok);
        }

        Reply add(String key, Object value) {
            text.append(",\"").append(key).append("\":");
            Json.write(text, value);
            return this;
        }

        Reply raw(String fields) {
            text.append(fields);
            return this;
        }

        String end() {
            return text.append('}').toString();
        }
    }

    // --- clients ------------------------------------------------------------------------------

    interface Body {
        String call() throws Exception;
    }

    abstract static class Client {
        final long number;
        private final ExecutorService thread;

        Client(long number) {
            this.number = number;
            this.thread = Executors.newSingleThreadExecutor(threads("client-" + number));
        }

        abstract void open(Properties props);

        abstract void handle(long id, String op, Map<String, Object> request);

        abstract void close(Duration timeout);

        /** Runs on this client's own thread, after everything asked of it before; replies with
         * what `body` returns (null: it replies itself) or with the exception it throws. */
        void run(long id, Body body) {
            thread.execute(() -> {
                String reply = attempt(id, body);
                if (reply != null) {
                    REPLIES.add(reply);
                }
            });
        }

        /** Makes the client's library object; a client that cannot be made is forgotten. */
        void make(long id, Properties props) {
            run(id, () -> {
                try {
                    open(props);
                } catch (RuntimeException e) {
                    forget();
                    throw e;
                }
                return ok(id).end();
            });
        }

        private void forget() {
            CLIENTS.remove(number);
            thread.shutdown();
        }

        String attempt(long id, Body body) {
            try {
                return body.call();
            } catch (Throwable e) {
                return error(id, e, null, rebalances());
            }
        }

        String rebalances() {
            return "";
        }

        void closeAndForget(long id, Map<String, Object> request) {
            run(id, () -> {
                try {
                    close(Duration.ofMillis(Json.number(request, "timeout_ms")));
                } finally {
                    forget();
                }
                return ok(id).end();
            });
        }
    }

    static final class ProducerClient extends Client {
        private final boolean transactional;
        private volatile KafkaProducer<byte[], byte[]> producer;

        ProducerClient(long number, boolean transactional) {
            super(number);
            this.transactional = transactional;
        }

        @Override
        void open(Properties props) {
            producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
            if (transactional) {
                try {
                    producer.initTransactions();
                } catch (RuntimeException e) {
                    producer.close(Duration.ZERO);
                    throw e;
                }
            }
        }

        @Override
        void handle(long id, String op, Map<String, Object> request) {
            switch (op) {
                case "send":
                    String topic = Json.string(request, "topic");
                    int partition = (int) Json.number(request, "partition");
                    byte[] value = Json.string(request, "value").getBytes(StandardCharsets.US_ASCII);
                    if (transactional) { // in order with the transaction's begin and end
                        run(id, () -> {
                            send(id, topic, partition, value);
                            return null;
                        });
                    } else {
                        SENDS.execute(() -> send(id, topic, partition, value));
                    }
                    break;
                case "begin":
                    run(id, () -> {
                        producer.beginTransaction();
                        return ok(id).end();
                    });
                    break;
                case "commit_txn":
                    run(id, () -> {
                        producer.commitTransaction();
                        return ok(id).end();
                    });
                    break;
                case "abort_txn":
                    run(id, () -> {
                        producer.abortTransaction();
                        return ok(id).end();
                    });
                    break;
                case "close":
                    closeAndForget(id, request);
                    break;
                default:
                    throw new IllegalArgumentException("a producer cannot " + op);
            }
        }

        /** Replies when the broker answers; a callback that runs inside send() on the calling
         * thread is the producer refusing the record before it reached its buffer. */
        private void send(long id, String topic, int partition, byte[] value) {
            Thread caller = Thread.currentThread();
            try {
                producer.send(new ProducerRecord<>(topic, partition, null, value), (metadata, e) -> {
                    if (e == null) {
                        REPLIES.add(ok(id).add("offset", metadata.offset()).end());
                    } else {
                        REPLIES.add(error(id, e, Thread.currentThread() != caller, ""));
                    }
                });
            } catch (Throwable e) { // thrown before the record reached the buffer
                REPLIES.add(error(id, e, false, ""));
            }
        }

        @Override
        void close(Duration timeout) {
            if (producer != null) {
                producer.close(timeout);
            }
        }
    }

    static final class ConsumerClient extends Client implements ConsumerRebalanceListener {
        private KafkaConsumer<byte[], byte[]> consumer;
        // What the last KafkaConsumer.poll returned beyond what the controller asked for: handed
        // out first, and counted out of the positions (they are where the controller's reads got to).
        private final ArrayDeque<ConsumerRecord<byte[], byte[]>> pending = new ArrayDeque<>();
        private final StringBuilder heard = new StringBuilder();

        ConsumerClient(long number) {
            super(number);
        }

        @Override
        void open(Properties props) {
            consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }

        @Override
        void handle(long id, String op, Map<String, Object> request) {
            switch (op) {
                case "assign":
                    run(id, () -> assign(id, request));
                    break;
                case "poll":
                    run(id, () -> poll(id, Json.number(request, "timeout_ms"), (int) Json.number(request, "max_records")));
                    break;
                case "positions":
                    run(id, () -> positions(id, Duration.ofMillis(Json.number(request, "timeout_ms"))));
                    break;
                case "end_offsets":
                    run(id, () -> {
                        Map<TopicPartition, Long> ends = consumer.endOffsets(
                                partitions(request.get("partitions")), Duration.ofMillis(Json.number(request, "timeout_ms")));
                        return ok(id).add("ends", triples(ends)).end();
                    });
                    break;
                case "subscribe":
                    run(id, () -> {
                        List<String> topics = new ArrayList<>();
                        for (Object t : (List<?>) request.get("topics")) {
                            topics.add((String) t);
                        }
                        consumer.subscribe(topics, this);
                        pending.clear();
                        return ok(id).end();
                    });
                    break;
                case "commit":
                    run(id, () -> {
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (Object o : (List<?>) request.get("offsets")) {
                            List<?> tpo = (List<?>) o;
                            offsets.put(new TopicPartition((String) tpo.get(0), ((Number) tpo.get(1)).intValue()),
                                    new OffsetAndMetadata(((Number) tpo.get(2)).longValue()));
                        }
                        consumer.commitSync(offsets, Duration.ofMillis(Json.number(request, "timeout_ms")));
                        return ok(id).raw(rebalances()).end();
                    });
                    break;
                case "close":
                    closeAndForget(id, request);
                    break;
                default:
                    throw new IllegalArgumentException("a consumer cannot " + op);
            }
        }

        private String assign(long id, Map<String, Object> request) {
            List<TopicPartition> tps = partitions(request.get("partitions"));
            Map<TopicPartition, Long> positions = new HashMap<>();
            for (Object o : (List<?>) request.get("positions")) {
                List<?> tpo = (List<?>) o;
                positions.put(new TopicPartition((String) tpo.get(0), ((Number) tpo.get(1)).intValue()),
                        ((Number) tpo.get(2)).longValue());
            }
            pending.clear();
            consumer.assign(tps);
            List<TopicPartition> fromStart = new ArrayList<>();
            for (TopicPartition tp : tps) {
                Long at = positions.get(tp);
                if (at == null) {
                    fromStart.add(tp);
                } else {
                    consumer.seek(tp, at);
                }
            }
            if (!fromStart.isEmpty()) {
                consumer.seekToBeginning(fromStart);
            }
            return ok(id).end();
        }

        private String poll(long id, long timeoutMs, int max) {
            if (pending.isEmpty()) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(timeoutMs))) {
                    pending.add(r);
                }
            }
            StringBuilder records = new StringBuilder("[");
            for (int i = 0; i < max && !pending.isEmpty(); i++) {
                ConsumerRecord<byte[], byte[]> r = pending.poll();
                if (i > 0) {
                    records.append(',');
                }
                records.append('[');
                Json.write(records, r.topic());
                records.append(',').append(r.partition()).append(',').append(r.offset()).append(',');
                Json.write(records, r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8));
                records.append(']');
            }
            return ok(id).raw(",\"records\":" + records.append(']')).raw(rebalances()).end();
        }

        /** The next offset of each assigned partition the controller will read; `timeout` zero:
         * only those known without asking the cluster. */
        private String positions(long id, Duration timeout) {
            Map<TopicPartition, Long> result = new LinkedHashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : pending) {
                result.putIfAbsent(new TopicPartition(r.topic(), r.partition()), r.offset());
            }
            for (TopicPartition tp : consumer.assignment()) {
                if (!result.containsKey(tp)) {
                    try {
                        result.put(tp, consumer.position(tp, timeout));
                    } catch (RuntimeException e) { // not known (yet): left out
                    }
                }
            }
            return ok(id).add("positions", triples(result)).raw(rebalances()).end();
        }

        @Override
        String rebalances() {
            if (heard.length() == 0) {
                return "";
            }
            String fields = ",\"rebalances\":[" + heard + "]";
            heard.setLength(0);
            return fields;
        }

        private void hear(String kind, Collection<TopicPartition> partitions) {
            if (partitions.isEmpty()) {
                return;
            }
            if (heard.length() > 0) {
                heard.append(',');
            }
            heard.append("{\"kind\":\"").append(kind).append("\",\"partitions\":");
            List<Object> pairs = new ArrayList<>();
            for (TopicPartition tp : partitions) {
                List<Object> pair = new ArrayList<>();
                pair.add(tp.topic());
                pair.add(tp.partition());
                pairs.add(pair);
            }
            Json.write(heard, pairs);
            heard.append('}');
        }

        // The rebalance listener: called inside poll (and close), on this client's thread.
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            hear("revoked", partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            hear("assigned", partitions);
        }

        // No @Override: clients before 2.4 have no such method (they revoke instead).
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            hear("revoked", partitions);
        }

        @Override
        void close(Duration timeout) {
            if (consumer != null) {
                consumer.close(timeout);
            }
        }
    }

    static List<TopicPartition> partitions(Object pairs) {
        List<TopicPartition> result = new ArrayList<>();
        for (Object o : (List<?>) pairs) {
            List<?> pair = (List<?>) o;
            result.add(new TopicPartition((String) pair.get(0), ((Number) pair.get(1)).intValue()));
        }
        return result;
    }

    static List<Object> triples(Map<TopicPartition, Long> offsets) {
        List<Object> result = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
            if (e.getValue() == null) {
                continue;
            }
            List<Object> triple = new ArrayList<>();
            triple.add(e.getKey().topic());
            triple.add(e.getKey().partition());
            triple.add(e.getValue());
            result.add(triple);
        }
        return result;
    }

    // --- JSON: the protocol's own small subset (objects, arrays, strings, integers, booleans,
    // null), so that the program needs no library beyond kafka-clients ---------------------------

    static final class Json {
        private final String text;
        private int at;

        private Json(String text) {
            this.text = text;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(String line) {
            Json parser = new Json(line);
            Object value = parser.value();
            parser.space();
            if (!(value instanceof Map) || parser.at != line.length()) {
                throw new IllegalArgumentException("not one JSON object: " + line);
            }
            return (Map<String, Object>) value;
        }

        static long number(Map<String, Object> request, String key) {
            Object value = request.get(key);
            if (!(value instanceof Number)) {
                throw new IllegalArgumentException("request without a number " + key);
            }
            return ((Number) value).longValue();
        }

        static String string(Map<String, Object> request, String key) {
            Object value = request.get(key);
            if (value instanceof Number) {
                return String.valueOf(((Number) value).longValue());
            }
            if (!(value instanceof String)) {
                throw new IllegalArgumentException("request without a text " + key);
            }
            return (String) value;
        }

        private void space() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
        }

        private Object value() {
            space();
            if (at >= text.length()) {
                throw new IllegalArgumentException("unexpected end");
            }
            char c = text.charAt(at);
            switch (c) {
                case '{':
                    return map();
                case '[':
                    return list();
                case '"':
                    return string();
                case 't':
                    return word("true", Boolean.TRUE);
                case 'f':
                    return word("false", Boolean.FALSE);
                case 'n':
                    return word("null", null);
                default:
                    return integer();
            }
        }

        private Map<String, Object> map() {
            Map<String, Object> result = new LinkedHashMap<>();
            at++;
            space();
            if (text.charAt(at) == '}') {
                at++;
                return result;
            }
            while (true) {
                space();
                String key = string();
                space();
                expect(':');
                result.put(key, value());
                space();
                if (text.charAt(at) == ',') {
                    at++;
                } else {
                    expect('}');
                    return result;
                }
            }
        }

        private List<Object> list() {
            List<Object> result = new ArrayList<>();
            at++;
            space();
            if (text.charAt(at) == ']') {
                at++;
                return result;
            }
            while (true) {
                result.add(value());
                space();
                if (text.charAt(at) == ',') {
                    at++;
                } else {
                    expect(']');
                    return result;
                }
            }
        }

        private String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = text.charAt(at++);
                if (c == '"') {
                    return out.toString();
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char e = text.charAt(at++);
                switch (e) {
                    case 'n': out.append('\n'); break;
                    case 't': out.append('\t'); break;
                    case 'r': out.append('\r'); break;
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'u':
                        out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        at += 4;
                        break;
                    default: out.append(e);
                }
            }
        }

        private Object word(String word, Object value) {
            if (!text.startsWith(word, at)) {
                throw new IllegalArgumentException("unexpected text at " + at);
            }
            at += word.length();
            return value;
        }

        private Long integer() {
            int start = at;
            if (text.charAt(at) == '-') {
                at++;
            }
            while (at < text.length() && Character.isDigit(text.charAt(at))) {
                at++;
            }
            if (start == at) {
                throw new IllegalArgumentException("unexpected character at " + at);
            }
            return Long.parseLong(text.substring(start, at));
        }

        private void expect(char c) {
            if (at >= text.length() || text.charAt(at) != c) {
                throw new IllegalArgumentException("expected '" + c + "' at " + at);
            }
            at++;
        }

        static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof String) {
                out.append('"');
                String s = (String) value;
                for (int i = 0; i < s.length(); i++) {
                    char c = s.charAt(i);
                    if (c == '"' || c == '\\') {
                        out.append('\\').append(c);
                    } else if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
                out.append('"');
            } else if (value instanceof List) {
                out.append('[');
                boolean first = true;
                for (Object item : (List<?>) value) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    write(out, item);
                }
                out.append(']');
            } else {
                out.append(value); // numbers and booleans
            }
        }
    }
}
