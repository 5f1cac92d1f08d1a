import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer for compat_tests/test_transactions_v2.py, run as a single-file
 * program: java -cp 'libs/*' TxnV2Producer.java BOOTSTRAP TOPIC TRANSACTIONAL_ID COUNT GROUP
 *
 * Transaction t sends "t{t}-p{p}-{i}" (i = 0..2) to partitions 0 and 1 of TOPIC and commits
 * offset t + 1 of TOPIC-0 for GROUP with sendOffsetsToTransaction; even transactions are
 * committed, odd ones aborted. Prints "committed t" or "aborted t" after each.
 */
public class TxnV2Producer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[3]);
        String group = args[4];
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int t = 0; t < count; t++) {
                producer.beginTransaction();
                for (int p = 0; p < 2; p++) {
                    for (int i = 0; i < 3; i++) {
                        producer.send(new ProducerRecord<>(topic, p, null, "t" + t + "-p" + p + "-" + i));
                    }
                }
                // Sent before the end, so an aborted transaction's records reach the log.
                producer.flush();
                producer.sendOffsetsToTransaction(
                    Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(t + 1)),
                    new ConsumerGroupMetadata(group));
                if (t % 2 == 0) {
                    producer.commitTransaction();
                    System.out.println("committed " + t);
                } else {
                    producer.abortTransaction();
                    System.out.println("aborted " + t);
                }
            }
        }
    }
}
