// Apache Kafka 3.9's own transaction log codec and transaction states
// (kafka.coordinator.transaction.TransactionLog / TransactionState), for
// tests/cluster/test_txn_log.py.
//
//   java -cp '.cache/kafka39/libs/*' tests/cluster/KafkaTxnLog.java < requests
//
// One JSON request a line, one JSON answer a line:
//   {"kind": "record", "id": ..., "value": {...} | null, "flexible": bool,
//    "josefk_key": b64, "josefk_value": b64 | null}
//     -> {"kafka_key": b64, "kafka_value": b64 | null (Kafka's encoding of id/value),
//         "decoded_id": ..., "decoded": {...} | null (Kafka's decoding of josefk's bytes)}
//        or {"error": "..."} when Kafka cannot decode them.
//   {"kind": "partition", "id": ..., "partitions": n} -> {"partition": Utils.abs(hashCode) % n}
//   {"kind": "states"} -> {"states": [{"name", "id", "previous": [...], "expire": bool}]}

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import kafka.coordinator.transaction.BaseKey;
import kafka.coordinator.transaction.TransactionLog;
import kafka.coordinator.transaction.TransactionLog$;
import kafka.coordinator.transaction.TransactionMetadata;
import kafka.coordinator.transaction.TransactionState;
import kafka.coordinator.transaction.TransactionState$;
import kafka.coordinator.transaction.TxnTransitMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.Utils;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

public class KafkaTxnLog {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Base64.Encoder B64 = Base64.getEncoder();
    static final Base64.Decoder UNB64 = Base64.getDecoder();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode req = JSON.readTree(line);
            ObjectNode out = JSON.createObjectNode();
            switch (req.get("kind").asText()) {
                case "record" -> record(req, out);
                case "partition" -> out.put("partition",
                    Utils.abs(req.get("id").asText().hashCode()) % req.get("partitions").asInt());
                case "states" -> states(out);
                default -> out.put("error", "unknown kind");
            }
            System.out.println(JSON.writeValueAsString(out));
        }
    }

    @SuppressWarnings("unchecked")
    static void record(JsonNode req, ObjectNode out) {
        String id = req.get("id").asText();
        out.put("kafka_key", B64.encodeToString(TransactionLog$.MODULE$.keyToBytes(id)));
        JsonNode v = req.get("value");
        if (v == null || v.isNull()) {
            out.putNull("kafka_value");
        } else {
            Set<TopicPartition> tps = new HashSet<>();
            for (JsonNode tp : v.get("partitions"))
                tps.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt()));
            TransactionState state = TransactionState$.MODULE$.fromId((byte) v.get("status").asInt());
            TxnTransitMetadata transit = new TxnTransitMetadata(
                v.get("producer_id").asLong(), -1L, (short) v.get("producer_epoch").asInt(), (short) -1,
                v.get("timeout_ms").asInt(), state,
                (scala.collection.immutable.Set<TopicPartition>) (Object) CollectionConverters.asScala(tps).toSet(),
                v.get("start").asLong(), v.get("last_update").asLong());
            out.put("kafka_value", B64.encodeToString(
                TransactionLog$.MODULE$.valueToBytes(transit, req.get("flexible").asBoolean())));
        }
        try {
            BaseKey key = TransactionLog.readTxnRecordKey(ByteBuffer.wrap(UNB64.decode(req.get("josefk_key").asText())));
            out.put("decoded_id", key.transactionalId());
            JsonNode jv = req.get("josefk_value");
            ByteBuffer buf = jv == null || jv.isNull() ? null : ByteBuffer.wrap(UNB64.decode(jv.asText()));
            Option<TransactionMetadata> md = TransactionLog.readTxnRecordValue(key.transactionalId(), buf);
            if (md.isEmpty()) {
                out.putNull("decoded");
            } else {
                TransactionMetadata m = md.get();
                ObjectNode d = out.putObject("decoded");
                d.put("producer_id", m.producerId());
                d.put("producer_epoch", m.producerEpoch());
                d.put("timeout_ms", m.txnTimeoutMs());
                d.put("status", m.state().id());
                d.put("state", m.state().name());
                List<String> parts = new ArrayList<>();
                for (TopicPartition tp : CollectionConverters.asJava(m.topicPartitions()))
                    parts.add(tp.topic() + ":" + tp.partition());
                parts.sort(null);
                ArrayNode a = d.putArray("partitions");
                parts.forEach(a::add);
                d.put("start", m.txnStartTimestamp());
                d.put("last_update", m.txnLastUpdateTimestamp());
            }
        } catch (Exception e) {
            out.put("error", e.toString());
        }
    }

    static void states(ObjectNode out) {
        ArrayNode a = out.putArray("states");
        for (TransactionState s : CollectionConverters.asJava(TransactionState$.MODULE$.AllStates())) {
            ObjectNode o = a.addObject();
            o.put("name", s.name());
            o.put("id", s.id());
            o.put("expire", s.isExpirationAllowed());
            ArrayNode prev = o.putArray("previous");
            List<String> names = new ArrayList<>();
            for (TransactionState p : CollectionConverters.asJava(s.validPreviousStates())) names.add(p.name());
            names.sort(null);
            names.forEach(prev::add);
        }
    }
}
