import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.List;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;

/**
 * For tests/cluster/test_txn_v2.py, run with Kafka 4.3.1's jars as a single-file program:
 * prints, base64, the TransactionLogValue v1 Kafka writes for an Ongoing transaction of
 * producer 7 at epoch 3 (timeout 60000, partitions t-0 and t-1, timestamps 20 and 10) of a
 * client of transaction version 2; then, for each base64 value given as an argument, the
 * fields Kafka reads from it: producerId epoch status clientTransactionVersion partitions.
 */
public class KafkaTxnValueV1 {
    public static void main(String[] args) {
        TransactionLogValue value = new TransactionLogValue()
            .setProducerId(7).setProducerEpoch((short) 3).setTransactionTimeoutMs(60000)
            .setTransactionStatus((byte) 1)
            .setTransactionPartitions(List.of(new TransactionLogValue.PartitionsSchema()
                .setTopic("t").setPartitionIds(List.of(0, 1))))
            .setTransactionLastUpdateTimestampMs(20).setTransactionStartTimestampMs(10)
            .setClientTransactionVersion((short) 2);
        byte[] bytes = MessageUtil.toVersionPrefixedBytes((short) 1, value);
        System.out.println(Base64.getEncoder().encodeToString(bytes));
        for (String arg : args) {
            ByteBuffer buffer = ByteBuffer.wrap(Base64.getDecoder().decode(arg));
            short version = buffer.getShort();
            TransactionLogValue read = new TransactionLogValue(new ByteBufferAccessor(buffer), version);
            System.out.println(read.producerId() + " " + read.producerEpoch() + " "
                + read.transactionStatus() + " " + read.clientTransactionVersion() + " "
                + read.transactionPartitions().size());
        }
    }
}
