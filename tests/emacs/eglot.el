;;; eglot.el --- agent-lsp through Emacs eglot in batch mode: definition and hover.
;;
;; Run by tests/e2e/eglot.rs as `emacs --batch -l eglot.el' with AGENT_TEST_SERVER (the
;; agent-lsp binary), AGENT_TEST_ROOT (the project, holding shapes.py) and AGENT_TEST_RESULTS
;; (where the results go, as JSON). Eglot, like Helix, reads a server's capabilities from its
;; `initialize' answer only and refuses what was not announced there ("Sorry, this server
;; doesn't do :textDocument/definition"), so this checks that agent-lsp announces the features
;; of a pyright that has not started yet.
(require 'eglot)
(require 'json)
(require 'xref)
(defvar agent-root (file-name-as-directory (getenv "AGENT_TEST_ROOT")))
(defvar agent-results nil)
(defun agent-put (key value) (push (cons key value) agent-results))
(defun agent-finish (code)
  (with-temp-file (getenv "AGENT_TEST_RESULTS") (insert (json-encode agent-results)))
  (kill-emacs code))
(defun agent-wait (what predicate)
  "Wait until PREDICATE holds, at most 60 s, answering the server meanwhile."
  (let ((deadline (+ (float-time) 60)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.1))
    (unless (funcall predicate) (error "waited 60 s for %s" what))))
(setq eglot-sync-connect 60 eglot-connect-timeout 60 eglot-autoshutdown t)
(add-hook 'project-find-functions (lambda (_dir) (cons 'transient agent-root)))
(condition-case err
    (progn
      (find-file (expand-file-name "shapes.py" agent-root))
      (python-mode)
      (eglot '(python-mode) (project-current) 'eglot-lsp-server
             (list (getenv "AGENT_TEST_SERVER") "serve") "python")
      (agent-wait "eglot to manage shapes.py" (lambda () (eglot-current-server)))
      (agent-put 'definitionProvider (and (eglot--server-capable :definitionProvider) t))
      (agent-put 'hoverProvider (and (eglot--server-capable :hoverProvider) t))
      ;; Definition: `describe' in `print(describe(square))' (line 15) to `def describe' (line 10).
      (goto-char (point-min)) (forward-line 14) (forward-char 7)
      (xref-find-definitions (xref-backend-identifier-at-point (xref-find-backend)))
      (agent-put 'definition (list (cons 'line (line-number-at-pos))
                                   (cons 'column (current-column))
                                   (cons 'file (file-name-nondirectory (buffer-file-name)))))
      ;; Hover: `area' in `shape.area()' (line 11).
      (goto-char (point-min)) (forward-line 10) (forward-char 27)
      (let ((hover nil))
        (eglot-hover-eldoc-function (lambda (info &rest _) (setq hover (or info ""))))
        (agent-wait "the hover answer" (lambda () hover))
        (agent-put 'hover (substring-no-properties hover)))
      (agent-finish 0))
  (error (agent-put 'error (error-message-string err)) (agent-finish 1)))
