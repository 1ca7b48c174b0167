package main

import (
	"flag"

	"filigrane/internal/node"
)

// s3Flags registers the object-storage flags shared by serve and admin; the returned function gives the
// configuration, nil when no endpoint was set (single-node mode).
func s3Flags(fs *flag.FlagSet) func() *node.S3Config {
	endpoint := fs.String("s3-endpoint", envOr("FILIGRANE_S3_ENDPOINT", ""), "object storage URL for cluster mode, e.g. http://127.0.0.1:7070")
	bucket := fs.String("s3-bucket", envOr("FILIGRANE_S3_BUCKET", "filigrane"), "object storage bucket (created when missing)")
	access := fs.String("s3-access-key", envOr("FILIGRANE_S3_ACCESS_KEY", envOr("AWS_ACCESS_KEY_ID", "")), "object storage access key")
	secret := fs.String("s3-secret-key", envOr("FILIGRANE_S3_SECRET_KEY", envOr("AWS_SECRET_ACCESS_KEY", "")), "object storage secret key")
	region := fs.String("s3-region", envOr("FILIGRANE_S3_REGION", "us-east-1"), "object storage region")
	return func() *node.S3Config {
		if *endpoint == "" {
			return nil
		}
		return &node.S3Config{Endpoint: *endpoint, Bucket: *bucket, AccessKey: *access, SecretKey: *secret, Region: *region}
	}
}
