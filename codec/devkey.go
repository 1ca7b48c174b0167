package codec

// DevelopmentKey is the deployment secret that the offline CLI and a development server use when no key is
// configured (flag --key-file, environment FILIGRANE_CODEC_KEY). It is public, so marks made with it can be read,
// and forged, by anyone: production deployments must set their own key of at least 16 random bytes, and keep it,
// because marks embedded under one key cannot be detected under another.
const DevelopmentKey = "filigrane-development-key-not-secret"
