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
//   trace NS TOPIC GROUP KEYS TIMEOUT_S
//       Trace.java: a push consumer of GROUP and a producer, both with message trace on,
//       send and consume one message with KEYS, then shut down (flushing their traces).
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

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public final class ClientDriver {
    static final int EXIT_USAGE = 2;
    static final int EXIT_START_FAILED = 3;
    static final int EXIT_FAILED = 4;
    static final int PULL_BATCH = 32;
    static final long PULL_TIMEOUT_MS = 10_000;
    static final int HEARTBEAT_MS = 1_000;
    static final long HEARTBEAT_WAIT_MS = 30_000;
    static final long RETRY_MS = 100;
    static final String VERSION_UNKNOWN = "does not upgrade to support for filter";

    private ClientDriver() {
    }

    public static void main(String[] args) {
        // Events keep the real stdout; the client's remoting logger may fall back to
        // logback's console default, so everything else goes to stderr.
        Events.open(System.out);
        System.setOut(System.err);
        int code;
        try {
            code = run(args);
        } catch (Throwable t) {
            Events.emit(Events.obj("event", "fatal", "error", Events.describe(t)));
            code = EXIT_FAILED;
        }
        Events.flush();
        // The client leaves non-daemon threads behind after a failed start: exit outright.
        System.exit(code);
    }

    private static int run(String[] args) throws Exception {
        if (args.length == 4 && args[0].equals("produce")) {
            return produce(args[1], args[2], args[3]);
        }
        if (args.length == 7 && args[0].equals("push")) {
            return Consumers.push(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]),
                Long.parseLong(args[6]));
        }
        if (args.length == 5 && args[0].equals("pull")) {
            return Consumers.pull(args[1], args[2], args[3], args[4]);
        }
        if (args.length >= 4 && args[0].equals("consume")) {
            return Consumers.consume(args[1], args[2], args[3], options(args, 4));
        }
        if (args.length == 8 && args[0].equals("read")) {
            return Consumers.read(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]),
                Integer.parseInt(args[6]), Long.parseLong(args[7]));
        }
        if (args.length == 8 && args[0].equals("litepull")) {
            return Consumers.litePull(args[1], args[2], args[3], Integer.parseInt(args[4]),
                Long.parseLong(args[5]), Integer.parseInt(args[6]), Long.parseLong(args[7]));
        }
        if (args.length == 6 && args[0].equals("request")) {
            return request(args[1], args[2], args[3], args[4], Long.parseLong(args[5]));
        }
        if ((args.length == 5 || args.length == 9) && args[0].equals("tx")) {
            return tx(args[1], args[2], LocalTransactionState.valueOf(args[3]),
                Long.parseLong(args[4]), args.length == 9 ? Arrays.copyOfRange(args, 5, 9) : null);
        }
        if (args.length == 6 && args[0].equals("trace")) {
            return Trace.run(args[1], args[2], args[3], args[4], Long.parseLong(args[5]));
        }
        Events.emit(Events.obj("event", "usage_error", "error",
            "usage: produce NS TOPIC FILE | push NS TOPIC GROUP SQL EXPECT TIMEOUT_S"
                + " | pull NS TOPIC GROUP SQL | consume NS TOPIC GROUP [K=V ...]"
                + " | read NS TOPIC GROUP BROKER QUEUE EXPECT TIMEOUT_S"
                + " | litepull NS TOPIC GROUP QUEUE SEEK EXPECT TIMEOUT_S"
                + " | request NS TOPIC MODE BODY TIMEOUT_MS"
                + " | tx NS GROUP CHECK TIMEOUT_S [TOPIC KEYS BODY LOCAL]"
                + " | trace NS TOPIC GROUP KEYS TIMEOUT_S"));
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
                    Events.emit(Events.obj("event", "sent", "line", lineNo, "keys", msg.getKeys(),
                        "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId(),
                        "status", r.getSendStatus().name(),
                        "queueId", r.getMessageQueue().getQueueId(),
                        "queueOffset", r.getQueueOffset()));
                } catch (Exception e) {
                    failures++;
                    Events.emit(Events.withCode(Events.obj("event", "send_failed", "line", lineNo,
                        "keys", msg.getKeys(), "error", Events.describe(e)), e));
                }
            }
        } finally {
            producer.shutdown();
        }
        Events.emit(Events.obj("event", "done", "failures", failures));
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

    // --- consume: a push consumer with a tag expression ----------------------------------

    static Map<String, String> options(String[] args, int from) {
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
                Map<String, Object> event = Events.messageEvent(response);
                event.put("event", "response");
                event.put("isRequest", response == msg);
                Events.emit(event);
            } else {
                CountDownLatch answered = new CountDownLatch(1);
                producer.request(msg, new RequestCallback() {
                    @Override
                    public void onSuccess(Message message) {
                        Map<String, Object> event = Events.messageEvent(message);
                        event.put("event", "callback");
                        event.put("kind", "success");
                        event.put("isRequest", message == msg);
                        Events.emit(event);
                        if (message != null && message != msg) {
                            answered.countDown();
                        }
                    }

                    @Override
                    public void onException(Throwable e) {
                        Events.emit(Events.obj("event", "callback", "kind", "exception", "error", Events.describe(e)));
                    }
                }, timeoutMs);
                answered.await(timeoutMs, TimeUnit.MILLISECONDS);
            }
        } catch (Exception e) {
            Events.emit(Events.withCode(Events.obj("event", "request_failed", "error", Events.describe(e)), e));
        } finally {
            producer.shutdown();
        }
        Events.emit(Events.obj("event", "done"));
        return 0;
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
                Events.emit(Events.obj("event", "executed", "keys", msg.getKeys(), "answer", local.name()));
                return local;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Map<String, Object> event = Events.consumedEvent(msg);
                event.put("event", "checked");
                event.put("transactionId", msg.getTransactionId());
                event.put("answer", check.name());
                Events.emit(event);
                return check;
            }
        });
        producer.start();
        Events.emit(Events.obj("event", "started"));
        try {
            if (send != null) {
                Message msg = new Message(send[0], decode(send[2]).getBytes(StandardCharsets.UTF_8));
                msg.setKeys(decode(send[1]));
                TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
                Events.emit(Events.obj("event", "sent", "keys", msg.getKeys(), "msgId", r.getMsgId(),
                    "offsetMsgId", r.getOffsetMsgId(), "transactionId", r.getTransactionId(),
                    "status", r.getSendStatus().name(),
                    "localTransactionState", r.getLocalTransactionState().name(),
                    "queueId", r.getMessageQueue().getQueueId()));
            }
        } catch (Exception e) {
            Events.emit(Events.withCode(Events.obj("event", "send_failed", "error", Events.describe(e)), e));
        }
        boolean ended = Consumers.untilStopped(new CountDownLatch(1), timeoutS);
        producer.shutdown();
        Events.emit(Events.obj("event", "done", "timedOut", !ended));
        return 0;
    }

    // --- shared ----------------------------------------------------------------------------

    static void configure(org.apache.rocketmq.client.ClientConfig client, String namesrv,
                                  String name) {
        client.setNamesrvAddr(namesrv);
        client.setInstanceName(name + "_" + pid());
        // The VIP channel (listenPort - 2) is not what these tests are about: plain port only.
        client.setVipChannelEnabled(false);
    }

    static long pid() {
        return ProcessHandle.current().pid();
    }
}
