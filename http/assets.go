package http

// assetRoutes registers the asset library endpoints. STUB until issue 6 lands.
func (s *Server) assetRoutes() {}
