module pushbridge/tools/kfake-broker

go 1.25.0

require (
	github.com/twmb/franz-go v1.21.1
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260804154521-adb3a18abe14
	github.com/twmb/franz-go/pkg/kmsg v1.13.1
)
