// Apache Kafka 3.9's own znode codecs (kafka.zk.ZkData), for tests/cluster/test_znodes.py.
//
//   java -cp '.cache/kafka39/libs/*' tests/cluster/KafkaZnodes.java < requests
//
// One JSON request a line: {"kind": K, "args": {...}, "josefk": base64 of josefk's bytes}.
// One JSON answer a line: {"kafka": what Kafka encodes from args (text), "decoded": what
// Kafka decodes from josefk's bytes}, or {"error": "..."} when Kafka cannot decode them.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import kafka.api.LeaderAndIsr;
import kafka.cluster.Broker;
import kafka.cluster.EndPoint;
import kafka.controller.LeaderIsrAndControllerEpoch;
import kafka.controller.ReplicaAssignment;
import kafka.zk.BrokerIdZNode;
import kafka.zk.BrokerInfo;
import kafka.zk.ClusterIdZNode;
import kafka.zk.ConfigEntityChangeNotificationSequenceZNode;
import kafka.zk.ConfigEntityZNode;
import kafka.zk.ControllerZNode;
import kafka.zk.ReassignPartitionsZNode;
import kafka.zk.TopicPartitionStateZNode;
import kafka.zk.TopicZNode;
import kafka.zk.ZKControllerRegistration;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.feature.Features;
import org.apache.kafka.common.feature.SupportedVersionRange;
import org.apache.kafka.common.network.ListenerName;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.zookeeper.data.Stat;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

public class KafkaZnodes {
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] argv) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode request = JSON.readTree(line);
            ObjectNode answer = JSON.createObjectNode();
            try {
                handle(request.get("kind").asText(), request.get("args"),
                       Base64.getDecoder().decode(request.get("josefk").asText()), answer);
            } catch (Exception e) {
                answer.put("error", e.toString());
            }
            System.out.println(JSON.writeValueAsString(answer));
        }
    }

    static <T> scala.collection.Seq<T> seq(List<T> items) {
        return CollectionConverters.asScala(items).toSeq();
    }

    static List<Object> ints(JsonNode array) {
        List<Object> out = new ArrayList<>();
        for (JsonNode n : array) out.add(n.asInt());
        return out;
    }

    static ArrayNode intArray(scala.collection.Iterable<Object> items) {
        ArrayNode out = JSON.createArrayNode();
        for (Object o : CollectionConverters.asJava(items)) out.add((Integer) o);
        return out;
    }

    static String text(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }

    static void handle(String kind, JsonNode args, byte[] josefk, ObjectNode answer) throws Exception {
        switch (kind) {
            case "broker": {
                List<EndPoint> endpoints = new ArrayList<>();
                for (JsonNode e : args.get("endpoints")) {
                    endpoints.add(new EndPoint(e.get(1).asText(), e.get(2).asInt(),
                        new ListenerName(e.get(0).asText()), SecurityProtocol.forName(e.get(3).asText())));
                }
                Map<String, SupportedVersionRange> features = new HashMap<>();
                Iterator<Map.Entry<String, JsonNode>> it = args.get("features").fields();
                while (it.hasNext()) {
                    Map.Entry<String, JsonNode> f = it.next();
                    features.put(f.getKey(), new SupportedVersionRange(
                        (short) f.getValue().get(0).asInt(), (short) f.getValue().get(1).asInt()));
                }
                Option<String> rack = args.get("rack").isNull() ? Option.empty() : Option.apply(args.get("rack").asText());
                Broker broker = new Broker(args.get("id").asInt(), seq(endpoints), rack,
                    Features.supportedFeatures(features));
                answer.put("kafka", text(BrokerIdZNode.encode(new BrokerInfo(broker, 5, -1))));

                BrokerInfo info = BrokerIdZNode.decode(args.get("id").asInt(), josefk);
                ObjectNode decoded = answer.putObject("decoded");
                decoded.put("id", info.broker().id());
                decoded.put("version", info.version());
                decoded.put("jmx_port", info.jmxPort());
                decoded.put("rack", info.broker().rack().isDefined() ? info.broker().rack().get() : null);
                ArrayNode eps = decoded.putArray("endpoints");
                for (EndPoint e : CollectionConverters.asJava(info.broker().endPoints())) {
                    eps.addArray().add(e.listenerName().value()).add(e.host()).add(e.port())
                        .add(e.securityProtocol().name);
                }
                ObjectNode fs = decoded.putObject("features");
                for (Map.Entry<String, SupportedVersionRange> f : info.broker().features().features().entrySet()) {
                    fs.putArray(f.getKey()).add(f.getValue().min()).add(f.getValue().max());
                }
                break;
            }
            case "controller": {
                answer.put("kafka", text(ControllerZNode.encode(args.get("id").asInt(), args.get("timestamp").asLong(), -1)));
                ZKControllerRegistration reg = ControllerZNode.decodeController(josefk, 0);
                ObjectNode decoded = answer.putObject("decoded");
                decoded.put("broker", reg.broker());
                decoded.put("kraft_epoch", reg.kraftEpoch().isDefined() ? (Integer) reg.kraftEpoch().get() : null);
                break;
            }
            case "cluster_id": {
                answer.put("kafka", text(ClusterIdZNode.toJson(args.get("id").asText())));
                answer.putObject("decoded").put("id", ClusterIdZNode.fromJson(josefk));
                break;
            }
            case "topic": {
                Map<TopicPartition, ReplicaAssignment> assignment = new HashMap<>();
                Iterator<Map.Entry<String, JsonNode>> it = args.get("partitions").fields();
                while (it.hasNext()) {
                    Map.Entry<String, JsonNode> p = it.next();
                    JsonNode adding = args.get("adding").get(p.getKey());
                    JsonNode removing = args.get("removing").get(p.getKey());
                    assignment.put(new TopicPartition("t", Integer.parseInt(p.getKey())), ReplicaAssignment.apply(
                        seq(ints(p.getValue())),
                        seq(adding == null ? new ArrayList<>() : ints(adding)),
                        seq(removing == null ? new ArrayList<>() : ints(removing))));
                }
                Option<Uuid> topicId = args.get("topic_id").isNull() ? Option.empty()
                    : Option.apply(Uuid.fromString(args.get("topic_id").asText()));
                answer.put("kafka", text(TopicZNode.encode(topicId, CollectionConverters.asScala(assignment))));

                TopicZNode.TopicIdReplicaAssignment decodedTopic = TopicZNode.decode("t", josefk);
                ObjectNode decoded = answer.putObject("decoded");
                decoded.put("topic_id", decodedTopic.topicId().isDefined() ? decodedTopic.topicId().get().toString() : null);
                ObjectNode parts = decoded.putObject("partitions");
                ObjectNode adding = decoded.putObject("adding");
                ObjectNode removing = decoded.putObject("removing");
                for (Map.Entry<TopicPartition, ReplicaAssignment> e : CollectionConverters.asJava(decodedTopic.assignment()).entrySet()) {
                    String p = Integer.toString(e.getKey().partition());
                    parts.set(p, intArray(e.getValue().replicas()));
                    if (e.getValue().addingReplicas().nonEmpty()) adding.set(p, intArray(e.getValue().addingReplicas()));
                    if (e.getValue().removingReplicas().nonEmpty()) removing.set(p, intArray(e.getValue().removingReplicas()));
                }
                break;
            }
            case "state": {
                scala.collection.immutable.List<Object> isr = CollectionConverters.asScala(ints(args.get("isr"))).toList();
                LeaderAndIsr leaderAndIsr = LeaderAndIsr.apply(args.get("leader").asInt(), args.get("leader_epoch").asInt(),
                    isr, LeaderRecoveryState.of((byte) args.get("leader_recovery_state").asInt()), 0);
                answer.put("kafka", text(TopicPartitionStateZNode.encode(
                    new LeaderIsrAndControllerEpoch(leaderAndIsr, args.get("controller_epoch").asInt()))));

                Stat stat = new Stat();
                stat.setVersion(7);
                LeaderIsrAndControllerEpoch read = TopicPartitionStateZNode.decode(josefk, stat).get();
                ObjectNode decoded = answer.putObject("decoded");
                decoded.put("leader", read.leaderAndIsr().leader());
                decoded.put("leader_epoch", read.leaderAndIsr().leaderEpoch());
                decoded.set("isr", intArray(read.leaderAndIsr().isr()));
                decoded.put("controller_epoch", read.controllerEpoch());
                decoded.put("leader_recovery_state", read.leaderAndIsr().leaderRecoveryState().value());
                decoded.put("partition_epoch", read.leaderAndIsr().partitionEpoch());
                break;
            }
            case "config": {
                Properties props = new Properties();
                Iterator<Map.Entry<String, JsonNode>> it = args.get("config").fields();
                while (it.hasNext()) {
                    Map.Entry<String, JsonNode> c = it.next();
                    props.setProperty(c.getKey(), c.getValue().asText());
                }
                answer.put("kafka", text(ConfigEntityZNode.encode(props)));
                ObjectNode decoded = answer.putObject("decoded");
                for (Map.Entry<Object, Object> e : ConfigEntityZNode.decode(josefk).entrySet()) {
                    decoded.put((String) e.getKey(), (String) e.getValue());
                }
                break;
            }
            case "config_change": {
                answer.put("kafka", text(ConfigEntityChangeNotificationSequenceZNode.encode(args.get("entity_path").asText())));
                answer.set("decoded", JSON.readTree(josefk));
                break;
            }
            case "reassignment": {
                Map<TopicPartition, scala.collection.Seq<Object>> target = new HashMap<>();
                for (JsonNode e : args.get("partitions")) {
                    target.put(new TopicPartition(e.get(0).asText(), e.get(1).asInt()), seq(ints(e.get(2))));
                }
                answer.put("kafka", text(ReassignPartitionsZNode.encode(CollectionConverters.asScala(target))));
                answer.set("decoded", JSON.readTree(josefk));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
    }
}
