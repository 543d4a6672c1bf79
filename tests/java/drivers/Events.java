// Rocklet's Java tier: the driver's output, one JSON object per line on stdout, built by
// hand (ASCII only, everything else escaped). See ClientDriver.java.

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

final class Events {
    private Events() {
    }


    /** The process's stdout, for events only: everything else printing there goes to stderr. */
    /** Where events go: the process's stdout, set by {@link #open} before it is redirected. */
    private static PrintStream events = System.out;

    static void open(PrintStream stdout) {
        events = stdout;
    }

    static void flush() {
        events.flush();
    }

    static Map<String, Object> messageEvent(Message m) {
        if (m == null) {
            return obj("message", null);
        }
        return obj("topic", m.getTopic(), "keys", m.getKeys(),
            "body", new String(m.getBody(), StandardCharsets.UTF_8),
            "allProps", new TreeMap<>(m.getProperties()));
    }

    static Map<String, Object> consumedEvent(MessageExt m) {
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
    static Map<String, Object> withCode(Map<String, Object> event, Throwable t) {
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
    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return sb.toString();
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    static void emit(Map<String, Object> event) {
        StringBuilder sb = new StringBuilder();
        writeJson(sb, event);
        PrintStream out = events;
        synchronized (out) {
            out.println(sb);
            out.flush();
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
