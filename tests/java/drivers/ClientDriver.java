// A command-line driver of the official RocketMQ 4.9.4 Java client, for Rocklet's Java
// compatibility tests (tests/java). It uses the client's public API only and prints one
// JSON object per line on stdout, so the tests can follow it as it runs.
//
//   produce NS TOPIC FILE
//       FILE has one message per line: TAGS \t KEYS \t PROPS \t BODY [\t QUEUE [\t DELAY]].
//       Every field is percent-encoded (UTF-8); an empty TAGS or KEYS is left unset. PROPS
//       is k=v&k2=v2 (user properties). QUEUE, when given, is the queue id to send to (a
//       MessageQueueSelector picks it); otherwise the producer chooses. DELAY, when given,
//       is the message's delay level (setDelayTimeLevel). One sync send per line:
//       {"event":"sent",...} or {"event":"send_failed",...}, then {"event":"done"}.
//       Exit 0 when every send was SEND_OK, else 4.
//
//   push NS TOPIC GROUP SQL EXPECT TIMEOUT_S
//       A DefaultMQPushConsumer subscribed with MessageSelector.bySql(SQL), new groups
//       starting at the first offset, one consume thread (deliveries are printed in the
//       order they were pulled, queue by queue). Prints {"event":"started"} once start()
//       returns, or {"event":"start_failed",...} and exits 3 when it throws. One
//       {"event":"consumed",...} per message. It stops after EXPECT messages (0: no
//       limit), when stdin closes, or after TIMEOUT_S, printing {"event":"done"}.
//
//   pull NS TOPIC GROUP SQL
//       A DefaultMQPullConsumer reads every queue of TOPIC with the selector from offset
//       0 to the queue's max offset (as it was when the queue's read began). Prints the
//       consumed events, {"event":"queue_done",...} per queue and {"event":"done"}, or
//       {"event":"pull_failed",...} and exits 4 on an exception. The client refuses SQL92
//       pulls until a heartbeat has told it the broker's version: those first refusals
//       are retried (for up to 30 s) and reported once as {"event":"pull_retry",...}.
//
//   consume NS TOPIC GROUP [KEY=VALUE ...]
//       A DefaultMQPushConsumer subscribed to TOPIC with a tag expression, new groups
//       starting at the first offset, one consume thread, one message per listener call.
//       Options: tags (the expression, default *), model (CLUSTERING, the default, or
//       BROADCASTING), later (never, the default; first: RECONSUME_LATER when a message's
//       reconsumeTimes is 0; always), maxReconsumeTimes (N), reply (true: answer each
//       message with MessageUtil.createReplyMessage(msg, "reply:" + body), sent by a
//       producer of this process), expect (stop after N deliveries; 0, the default: no
//       limit), timeout (seconds, default 120). Prints {"event":"started"} or
//       {"event":"start_failed",...} (exit 3), one {"event":"consumed",...} per delivery
//       with what the listener returned ("status"), {"event":"replied",...} or
//       {"event":"reply_failed",...} per reply, then {"event":"done"} when it stops (after
//       EXPECT deliveries, when stdin closes, or at the timeout).
//
//   read NS TOPIC GROUP BROKER QUEUE EXPECT TIMEOUT_S
//       A DefaultMQPullConsumer reads queue QUEUE of TOPIC on broker BROKER (a name) from
//       offset 0 with pullBlockIfNotFound until it has EXPECT messages or TIMEOUT_S passed:
//       {"event":"consumed",...} per message, then {"event":"done"}; on an exception
//       {"event":"read_failed",...} (with the broker's "code" when it answered) and exit 4.
//
//   litepull NS TOPIC GROUP QUEUE SEEK EXPECT TIMEOUT_S
//       A DefaultLitePullConsumer (autoCommit off) assigned every queue of TOPIC. When
//       SEEK >= 0 it seeks queue QUEUE to SEEK ({"event":"seeked"}); otherwise it prints
//       {"event":"committed","when":"start",...}: committed(QUEUE) as the group's stored
//       offset. It polls until EXPECT messages of QUEUE came ({"event":"consumed"} per
//       message of any queue, in poll order), then commitSync() and prints
//       {"event":"committed","when":"end","queueId":QUEUE,"offset":committed(QUEUE)},
//       shuts down and prints {"event":"done"} (exit 4 when EXPECT did not come in time).
//
//   request NS TOPIC MODE BODY TIMEOUT_MS
//       DefaultMQProducer.request of one message (KEYS "request", body BODY). MODE sync:
//       request(msg, timeout), printing {"event":"response",...} with the Message it
//       returned (or {"event":"request_failed",...}). MODE callback: request(msg,
//       RequestCallback, timeout), printing {"event":"callback","kind":"success",...} per
//       onSuccess (its Message, which may be null) and {"event":"callback",
//       "kind":"exception",...} per onException; it waits until a callback carried a
//       message other than the request (or TIMEOUT_MS passed). Then {"event":"done"}.
//
//   tx NS GROUP CHECK TIMEOUT_S [TOPIC KEYS BODY LOCAL]
//       A TransactionMQProducer of GROUP (heartbeats every second) whose
//       checkLocalTransaction prints {"event":"checked",...} (a consumed event of the
//       checked message, with its "transactionId") and answers CHECK (COMMIT_MESSAGE,
//       ROLLBACK_MESSAGE or UNKNOW). With TOPIC, it sends one message (KEYS and BODY
//       percent-encoded) in a transaction whose executeLocalTransaction answers LOCAL,
//       printing {"event":"sent",...} with the local transaction state. Prints
//       {"event":"started"} first; runs until stdin closes or TIMEOUT_S, then
//       {"event":"done"}.
//
// A "sent" event has the SendResult's msgId (the client's unique id), offsetMsgId (the
// broker's, from its address and commit log offset), queueId and queueOffset. A
// "consumed" event has the MessageExt's keys, tags, user properties ("props"), body,
// topic, queueId, queueOffset, msgId, offsetMsgId, reconsumeTimes, bornTimestamp,
// storeTimestamp, and every property as the client sees it ("allProps": system ones too,
// including those the client adds when it delivers, MIN_OFFSET, MAX_OFFSET,
// CONSUME_START_TIME).
//
// Client logs go under ${user.home}/logs/rocketmqlogs: give -Duser.home=<a tmp dir>. Only
// events are printed on stdout; anything else the client prints there goes to stderr.

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

public final class ClientDriver {
    private static final int EXIT_USAGE = 2;
    private static final int EXIT_START_FAILED = 3;
    private static final int EXIT_FAILED = 4;
    private static final int PULL_BATCH = 32;
    private static final long PULL_TIMEOUT_MS = 10_000;
    private static final int HEARTBEAT_MS = 1_000;
    private static final long HEARTBEAT_WAIT_MS = 30_000;
    private static final long RETRY_MS = 100;
    private static final String VERSION_UNKNOWN = "does not upgrade to support for filter";

    /** The process's stdout, for events only: everything else printing there goes to stderr. */
    private static final PrintStream EVENTS = System.out;

    private ClientDriver() {
    }

    public static void main(String[] args) {
        // The client's remoting logger may fall back to logback's console default.
        System.setOut(System.err);
        int code;
        try {
            code = run(args);
        } catch (Throwable t) {
            emit(obj("event", "fatal", "error", describe(t)));
            code = EXIT_FAILED;
        }
        EVENTS.flush();
        // The client leaves non-daemon threads behind after a failed start: exit outright.
        System.exit(code);
    }

    private static int run(String[] args) throws Exception {
        if (args.length == 4 && args[0].equals("produce")) {
            return produce(args[1], args[2], args[3]);
        }
        if (args.length == 7 && args[0].equals("push")) {
            return push(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]),
                Long.parseLong(args[6]));
        }
        if (args.length == 5 && args[0].equals("pull")) {
            return pull(args[1], args[2], args[3], args[4]);
        }
        if (args.length >= 4 && args[0].equals("consume")) {
            return consume(args[1], args[2], args[3], options(args, 4));
        }
        if (args.length == 8 && args[0].equals("read")) {
            return read(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]),
                Integer.parseInt(args[6]), Long.parseLong(args[7]));
        }
        if (args.length == 8 && args[0].equals("litepull")) {
            return litePull(args[1], args[2], args[3], Integer.parseInt(args[4]),
                Long.parseLong(args[5]), Integer.parseInt(args[6]), Long.parseLong(args[7]));
        }
        if (args.length == 6 && args[0].equals("request")) {
            return request(args[1], args[2], args[3], args[4], Long.parseLong(args[5]));
        }
        if ((args.length == 5 || args.length == 9) && args[0].equals("tx")) {
            return tx(args[1], args[2], LocalTransactionState.valueOf(args[3]),
                Long.parseLong(args[4]), args.length == 9 ? Arrays.copyOfRange(args, 5, 9) : null);
        }
        emit(obj("event", "usage_error", "error",
            "usage: produce NS TOPIC FILE | push NS TOPIC GROUP SQL EXPECT TIMEOUT_S"
                + " | pull NS TOPIC GROUP SQL | consume NS TOPIC GROUP [K=V ...]"
                + " | read NS TOPIC GROUP BROKER QUEUE EXPECT TIMEOUT_S"
                + " | litepull NS TOPIC GROUP QUEUE SEEK EXPECT TIMEOUT_S"
                + " | request NS TOPIC MODE BODY TIMEOUT_MS"
                + " | tx NS GROUP CHECK TIMEOUT_S [TOPIC KEYS BODY LOCAL]"));
        return EXIT_USAGE;
    }

    // --- produce -----------------------------------------------------------------------

    private static int produce(String namesrv, String topic, String file) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8);
        DefaultMQProducer producer = new DefaultMQProducer("javatier_producer_" + pid());
        configure(producer, namesrv, "produce");
        MessageQueueSelector byQueueId = (mqs, msg, arg) -> {
            int wanted = (Integer) arg;
            for (MessageQueue mq : mqs) {
                if (mq.getQueueId() == wanted) {
                    return mq;
                }
            }
            return null;
        };
        producer.start();
        int failures = 0;
        try {
            int lineNo = 0;
            for (String line : lines) {
                lineNo++;
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                Message msg = new Message(topic, decode(f[3]).getBytes(StandardCharsets.UTF_8));
                if (!f[0].isEmpty()) {
                    msg.setTags(decode(f[0]));
                }
                if (!f[1].isEmpty()) {
                    msg.setKeys(decode(f[1]));
                }
                for (Map.Entry<String, String> p : parseProps(f[2]).entrySet()) {
                    msg.putUserProperty(p.getKey(), p.getValue());
                }
                if (f.length > 5 && !f[5].isEmpty()) {
                    msg.setDelayTimeLevel(Integer.parseInt(f[5]));
                }
                try {
                    SendResult r = f.length > 4 && !f[4].isEmpty()
                        ? producer.send(msg, byQueueId, Integer.parseInt(f[4]))
                        : producer.send(msg);
                    if (r.getSendStatus() != SendStatus.SEND_OK) {
                        failures++;
                    }
                    emit(obj("event", "sent", "line", lineNo, "keys", msg.getKeys(),
                        "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId(),
                        "status", r.getSendStatus().name(),
                        "queueId", r.getMessageQueue().getQueueId(),
                        "queueOffset", r.getQueueOffset()));
                } catch (Exception e) {
                    failures++;
                    emit(withCode(obj("event", "send_failed", "line", lineNo,
                        "keys", msg.getKeys(), "error", describe(e)), e));
                }
            }
        } finally {
            producer.shutdown();
        }
        emit(obj("event", "done", "failures", failures));
        return failures == 0 ? 0 : EXIT_FAILED;
    }

    private static Map<String, String> parseProps(String field) throws Exception {
        Map<String, String> props = new LinkedHashMap<>();
        if (field.isEmpty()) {
            return props;
        }
        for (String pair : field.split("&")) {
            int eq = pair.indexOf('=');
            props.put(decode(pair.substring(0, eq)), decode(pair.substring(eq + 1)));
        }
        return props;
    }

    private static String decode(String s) throws Exception {
        return URLDecoder.decode(s, "UTF-8");
    }

    // --- push ----------------------------------------------------------------------------

    private static int push(String namesrv, String topic, String group, String sql, int expect,
                            long timeoutS) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        configure(consumer, namesrv, group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeThreadMin(1);
        consumer.setConsumeThreadMax(1);
        consumer.subscribe(topic, MessageSelector.bySql(sql));
        CountDownLatch stop = new CountDownLatch(1);
        AtomicInteger consumed = new AtomicInteger();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                emit(consumedEvent(m));
                if (expect > 0 && consumed.incrementAndGet() >= expect) {
                    stop.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            consumer.start();
        } catch (MQClientException e) {
            emit(withCode(obj("event", "start_failed", "error", describe(e)), e));
            return EXIT_START_FAILED;
        }
        emit(obj("event", "started"));
        Thread stdinWatch = new Thread(() -> {
            drain(System.in);
            stop.countDown();
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();
        boolean ended = stop.await(timeoutS, TimeUnit.SECONDS);
        consumer.shutdown();
        emit(obj("event", "done", "consumed", consumed.get(), "timedOut", !ended));
        return 0;
    }

    private static void drain(InputStream in) {
        try (BufferedReader r = new BufferedReader(
                new InputStreamReader(in, StandardCharsets.UTF_8))) {
            while (r.readLine() != null) {
                // Only the end of stdin matters.
            }
        } catch (Exception e) {
            // A broken stdin ends the run like a closed one.
        }
    }

    // --- pull ----------------------------------------------------------------------------

    private static int pull(String namesrv, String topic, String group, String sql)
        throws Exception {
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(group);
        configure(consumer, namesrv, group);
        // The client pulls with SQL92 only from a broker whose version a heartbeat has
        // recorded: register the topic (its route, so its broker, is then polled from the
        // start) and heartbeat every second rather than every 30 s.
        consumer.setRegisterTopics(Collections.singleton(topic));
        consumer.setHeartbeatBrokerInterval(HEARTBEAT_MS);
        MessageSelector selector = MessageSelector.bySql(sql);
        consumer.start();
        try {
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
            queues.sort(Comparator.comparing(MessageQueue::getBrokerName)
                .thenComparingInt(MessageQueue::getQueueId));
            int total = 0;
            for (MessageQueue mq : queues) {
                long max = consumer.maxOffset(mq);
                long offset = 0;
                int found = 0;
                while (offset < max) {
                    PullResult r = pullOnceKnown(consumer, mq, selector, offset);
                    if (r.getPullStatus() == PullStatus.FOUND) {
                        for (MessageExt m : r.getMsgFoundList()) {
                            emit(consumedEvent(m));
                            found++;
                        }
                    }
                    if (r.getNextBeginOffset() <= offset) {
                        emit(obj("event", "pull_failed", "error", "no progress at offset "
                            + offset + " of queue " + mq.getQueueId() + ": " + r.getPullStatus()));
                        return EXIT_FAILED;
                    }
                    offset = r.getNextBeginOffset();
                }
                total += found;
                emit(obj("event", "queue_done", "queueId", mq.getQueueId(), "maxOffset", max,
                    "found", found));
            }
            emit(obj("event", "done", "consumed", total));
            return 0;
        } catch (Exception e) {
            emit(withCode(obj("event", "pull_failed", "error", describe(e)), e));
            return EXIT_FAILED;
        } finally {
            consumer.shutdown();
        }
    }

    /**
     * One pull; while no heartbeat has yet recorded the broker's version, the client
     * refuses SQL92 pulls itself ("does not upgrade to support for filter message by
     * SQL92"): those are retried until HEARTBEAT_WAIT_MS, and reported once.
     */
    private static PullResult pullOnceKnown(DefaultMQPullConsumer consumer, MessageQueue mq,
                                            MessageSelector selector, long offset)
        throws Exception {
        long deadline = System.currentTimeMillis() + HEARTBEAT_WAIT_MS;
        boolean reported = false;
        while (true) {
            try {
                return consumer.pull(mq, selector, offset, PULL_BATCH, PULL_TIMEOUT_MS);
            } catch (MQClientException e) {
                boolean versionUnknown = e.getResponseCode() == -1 && e.getErrorMessage() != null
                    && e.getErrorMessage().contains(VERSION_UNKNOWN);
                if (!versionUnknown || System.currentTimeMillis() > deadline) {
                    throw e;
                }
                if (!reported) {
                    emit(obj("event", "pull_retry", "queueId", mq.getQueueId(),
                        "error", describe(e)));
                    reported = true;
                }
                Thread.sleep(RETRY_MS);
            }
        }
    }

    // --- consume: a push consumer with a tag expression ----------------------------------

    private static Map<String, String> options(String[] args, int from) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("not KEY=VALUE: " + args[i]);
            }
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return opts;
    }

    private static int consume(String namesrv, String topic, String group,
                               Map<String, String> opts) throws Exception {
        String later = opts.getOrDefault("later", "never");
        boolean reply = Boolean.parseBoolean(opts.getOrDefault("reply", "false"));
        int expect = Integer.parseInt(opts.getOrDefault("expect", "0"));
        long timeoutS = Long.parseLong(opts.getOrDefault("timeout", "120"));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        configure(consumer, namesrv, group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeThreadMin(1);
        consumer.setConsumeThreadMax(1);
        consumer.setMessageModel(MessageModel.valueOf(opts.getOrDefault("model", "CLUSTERING")));
        if (opts.containsKey("maxReconsumeTimes")) {
            consumer.setMaxReconsumeTimes(Integer.parseInt(opts.get("maxReconsumeTimes")));
        }
        consumer.subscribe(topic, opts.getOrDefault("tags", "*"));
        DefaultMQProducer replier = null;
        if (reply) {
            replier = new DefaultMQProducer("javatier_replier_" + pid());
            configure(replier, namesrv, "replier");
            replier.start();
        }
        final DefaultMQProducer replies = replier;
        CountDownLatch stop = new CountDownLatch(1);
        AtomicInteger consumed = new AtomicInteger();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            ConsumeConcurrentlyStatus status = ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            for (MessageExt m : msgs) {
                boolean again = later.equals("always")
                    || (later.equals("first") && m.getReconsumeTimes() == 0);
                if (again) {
                    status = ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                Map<String, Object> event = consumedEvent(m);
                event.put("status", again ? "RECONSUME_LATER" : "CONSUME_SUCCESS");
                emit(event);
                if (replies != null) {
                    sendReply(replies, m);
                }
                if (consumed.incrementAndGet() >= expect && expect > 0) {
                    stop.countDown();
                }
            }
            return status;
        });
        try {
            consumer.start();
        } catch (MQClientException e) {
            emit(withCode(obj("event", "start_failed", "error", describe(e)), e));
            return EXIT_START_FAILED;
        }
        emit(obj("event", "started"));
        Thread stdinWatch = new Thread(() -> {
            drain(System.in);
            stop.countDown();
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();
        boolean ended = stop.await(timeoutS, TimeUnit.SECONDS);
        consumer.shutdown();
        if (replies != null) {
            replies.shutdown();
        }
        emit(obj("event", "done", "consumed", consumed.get(), "timedOut", !ended));
        return 0;
    }

    private static void sendReply(DefaultMQProducer replies, MessageExt request) {
        try {
            String body = "reply:" + new String(request.getBody(), StandardCharsets.UTF_8);
            Message answer = MessageUtil.createReplyMessage(request,
                body.getBytes(StandardCharsets.UTF_8));
            SendResult r = replies.send(answer);
            emit(obj("event", "replied", "topic", answer.getTopic(),
                "status", r.getSendStatus().name(), "props", new TreeMap<>(answer.getProperties())));
        } catch (Exception e) {
            emit(withCode(obj("event", "reply_failed", "error", describe(e)), e));
        }
    }

    // --- read: one queue with a pull consumer ----------------------------------------------

    private static int read(String namesrv, String topic, String group, String broker, int queue,
                            int expect, long timeoutS) throws Exception {
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(group);
        configure(consumer, namesrv, group);
        consumer.start();
        long deadline = System.currentTimeMillis() + timeoutS * 1000;
        MessageQueue mq = new MessageQueue(topic, broker, queue);
        int found = 0;
        try {
            long offset = 0;
            while (found < expect && System.currentTimeMillis() < deadline) {
                PullResult r = consumer.pullBlockIfNotFound(mq, "*", offset, PULL_BATCH);
                if (r.getPullStatus() == PullStatus.FOUND) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        emit(consumedEvent(m));
                        found++;
                    }
                }
                offset = r.getNextBeginOffset();
            }
            emit(obj("event", "done", "consumed", found));
            return found >= expect ? 0 : EXIT_FAILED;
        } catch (Exception e) {
            emit(withCode(obj("event", "read_failed", "error", describe(e)), e));
            return EXIT_FAILED;
        } finally {
            consumer.shutdown();
        }
    }

    // --- litepull: assign, seek, poll, commit ------------------------------------------------

    private static int litePull(String namesrv, String topic, String group, int queue, long seek,
                                int expect, long timeoutS) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        configure(consumer, namesrv, group);
        consumer.setAutoCommit(false);
        consumer.start();
        try {
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchMessageQueues(topic));
            queues.sort(Comparator.comparing(MessageQueue::getBrokerName)
                .thenComparingInt(MessageQueue::getQueueId));
            MessageQueue target = null;
            List<Integer> ids = new ArrayList<>();
            for (MessageQueue mq : queues) {
                ids.add(mq.getQueueId());
                if (mq.getQueueId() == queue) {
                    target = mq;
                }
            }
            consumer.assign(queues);
            emit(obj("event", "assigned", "queueIds", ids.toString()));
            if (target == null) {
                emit(obj("event", "litepull_failed", "error", "no queue " + queue));
                return EXIT_FAILED;
            }
            if (seek >= 0) {
                consumer.seek(target, seek);
                emit(obj("event", "seeked", "queueId", queue, "offset", seek));
            } else {
                emit(obj("event", "committed", "when", "start", "queueId", queue,
                    "offset", consumer.committed(target)));
            }
            long deadline = System.currentTimeMillis() + timeoutS * 1000;
            int got = 0;
            while (got < expect && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    emit(consumedEvent(m));
                    if (m.getQueueId() == queue) {
                        got++;
                    }
                }
            }
            consumer.commitSync();
            emit(obj("event", "committed", "when", "end", "queueId", queue,
                "offset", consumer.committed(target)));
            emit(obj("event", "done", "consumed", got));
            return got >= expect ? 0 : EXIT_FAILED;
        } catch (Exception e) {
            emit(withCode(obj("event", "litepull_failed", "error", describe(e)), e));
            return EXIT_FAILED;
        } finally {
            consumer.shutdown();
        }
    }

    // --- request: request-reply ----------------------------------------------------------------

    private static int request(String namesrv, String topic, String mode, String body,
                               long timeoutMs) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("javatier_requester_" + pid());
        configure(producer, namesrv, "requester");
        producer.start();
        Message msg = new Message(topic, body.getBytes(StandardCharsets.UTF_8));
        msg.setKeys("request");
        try {
            if (mode.equals("sync")) {
                Message response = producer.request(msg, timeoutMs);
                Map<String, Object> event = messageEvent(response);
                event.put("event", "response");
                event.put("isRequest", response == msg);
                emit(event);
            } else {
                CountDownLatch answered = new CountDownLatch(1);
                producer.request(msg, new RequestCallback() {
                    @Override
                    public void onSuccess(Message message) {
                        Map<String, Object> event = messageEvent(message);
                        event.put("event", "callback");
                        event.put("kind", "success");
                        event.put("isRequest", message == msg);
                        emit(event);
                        if (message != null && message != msg) {
                            answered.countDown();
                        }
                    }

                    @Override
                    public void onException(Throwable e) {
                        emit(obj("event", "callback", "kind", "exception", "error", describe(e)));
                    }
                }, timeoutMs);
                answered.await(timeoutMs, TimeUnit.MILLISECONDS);
            }
        } catch (Exception e) {
            emit(withCode(obj("event", "request_failed", "error", describe(e)), e));
        } finally {
            producer.shutdown();
        }
        emit(obj("event", "done"));
        return 0;
    }

    private static Map<String, Object> messageEvent(Message m) {
        if (m == null) {
            return obj("message", null);
        }
        return obj("topic", m.getTopic(), "keys", m.getKeys(),
            "body", new String(m.getBody(), StandardCharsets.UTF_8),
            "allProps", new TreeMap<>(m.getProperties()));
    }

    // --- tx: transactional producer and check-back --------------------------------------------

    private static int tx(String namesrv, String group, LocalTransactionState check, long timeoutS,
                          String[] send) throws Exception {
        TransactionMQProducer producer = new TransactionMQProducer(group);
        configure(producer, namesrv, group);
        // The broker checks back on a producer its heartbeat registered: every second,
        // not every 30 s.
        producer.setHeartbeatBrokerInterval(HEARTBEAT_MS);
        LocalTransactionState local = send == null ? null : LocalTransactionState.valueOf(send[3]);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                emit(obj("event", "executed", "keys", msg.getKeys(), "answer", local.name()));
                return local;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Map<String, Object> event = consumedEvent(msg);
                event.put("event", "checked");
                event.put("transactionId", msg.getTransactionId());
                event.put("answer", check.name());
                emit(event);
                return check;
            }
        });
        producer.start();
        emit(obj("event", "started"));
        try {
            if (send != null) {
                Message msg = new Message(send[0], decode(send[2]).getBytes(StandardCharsets.UTF_8));
                msg.setKeys(decode(send[1]));
                TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
                emit(obj("event", "sent", "keys", msg.getKeys(), "msgId", r.getMsgId(),
                    "offsetMsgId", r.getOffsetMsgId(), "transactionId", r.getTransactionId(),
                    "status", r.getSendStatus().name(),
                    "localTransactionState", r.getLocalTransactionState().name(),
                    "queueId", r.getMessageQueue().getQueueId()));
            }
        } catch (Exception e) {
            emit(withCode(obj("event", "send_failed", "error", describe(e)), e));
        }
        CountDownLatch stop = new CountDownLatch(1);
        Thread stdinWatch = new Thread(() -> {
            drain(System.in);
            stop.countDown();
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();
        boolean ended = stop.await(timeoutS, TimeUnit.SECONDS);
        producer.shutdown();
        emit(obj("event", "done", "timedOut", !ended));
        return 0;
    }

    // --- shared ----------------------------------------------------------------------------

    private static void configure(org.apache.rocketmq.client.ClientConfig client, String namesrv,
                                  String name) {
        client.setNamesrvAddr(namesrv);
        client.setInstanceName(name + "_" + pid());
        // The VIP channel (listenPort - 2) is not what these tests are about: plain port only.
        client.setVipChannelEnabled(false);
    }

    private static long pid() {
        return ProcessHandle.current().pid();
    }

    private static Map<String, Object> consumedEvent(MessageExt m) {
        Map<String, Object> props = new TreeMap<>();
        for (Map.Entry<String, String> p : m.getProperties().entrySet()) {
            if (!MessageConst.STRING_HASH_SET.contains(p.getKey())) {
                props.put(p.getKey(), p.getValue());
            }
        }
        String offsetMsgId = m instanceof MessageClientExt
            ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId();
        return obj("event", "consumed", "keys", m.getKeys(), "tags", m.getTags(),
            "props", props, "queueId", m.getQueueId(), "queueOffset", m.getQueueOffset(),
            "msgId", m.getMsgId(), "body", new String(m.getBody(), StandardCharsets.UTF_8),
            "topic", m.getTopic(), "reconsumeTimes", m.getReconsumeTimes(),
            "offsetMsgId", offsetMsgId, "bornTimestamp", m.getBornTimestamp(),
            "storeTimestamp", m.getStoreTimestamp(), "allProps", new TreeMap<>(m.getProperties()));
    }

    /** The broker's answer code, when the exception carries one. */
    private static Map<String, Object> withCode(Map<String, Object> event, Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof MQClientException && ((MQClientException) c).getResponseCode() > 0) {
                event.put("code", ((MQClientException) c).getResponseCode());
                return event;
            }
            if (c instanceof MQBrokerException) {
                event.put("code", ((MQBrokerException) c).getResponseCode());
                return event;
            }
        }
        return event;
    }

    /** The exception and its causes: "Class: message <- Cause: message ...". */
    private static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return sb.toString();
    }

    private static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static void emit(Map<String, Object> event) {
        StringBuilder sb = new StringBuilder();
        writeJson(sb, event);
        synchronized (EVENTS) {
            EVENTS.println(sb);
            EVENTS.flush();
        }
    }

    private static void writeJson(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                writeString(sb, String.valueOf(e.getKey()));
                sb.append(':');
                writeJson(sb, e.getValue());
            }
            sb.append('}');
        } else {
            writeString(sb, v.toString());
        }
    }

    private static void writeString(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    // ASCII only: the JVM's stdout encoding follows the locale.
                    if (c < 0x20 || c > 0x7e) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
