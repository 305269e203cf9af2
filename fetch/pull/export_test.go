package pull

// PayloadRereads is how many fresh payloads pulls have read back from their blob so far.
func PayloadRereads() int64 { return payloadRereads.Load() }
