package main

// app is the sample application: a Deployment that reads every key of a
// ConfigMap as environment variables and mounts a Secret as files.
const app = `
apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: demo
data:
  GREETING: hello
  LOG_LEVEL: info
---
apiVersion: v1
kind: Secret
metadata:
  name: web-tls
  namespace: demo
stringData:
  tls.key: not-a-real-key
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example/web:1.0
          envFrom:
            - configMapRef: {name: web-config}
          volumeMounts:
            - {name: tls, mountPath: /etc/tls, readOnly: true}
      volumes:
        - name: tls
          secret: {secretName: web-tls}
`
