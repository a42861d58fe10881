# bash completion for dlock. The options come from `dlock CMD --help`, so they stay in step with
# the tool. After `--` the words are COMMAND's: completed as a command line (bash-completion's
# _command_offset) when available. Anything else (lock names, files for --redis-file or
# --tls-ca) falls back to bash's default completion.
_dlock() {
  local cur=${COMP_WORDS[COMP_CWORD]} cmd="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} == -- ]]; then
      COMPREPLY=()
      if declare -F _command_offset >/dev/null; then _command_offset $((i + 1)); fi
      return
    fi
    [[ -z $cmd && ${COMP_WORDS[i]} != -* ]] && cmd=${COMP_WORDS[i]}
  done
  COMPREPLY=()
  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W "run acquire release status watch sandbox demo semaphore serve --help --version" -- "$cur"))
  elif [[ $cur == -* ]]; then
    local opts
    opts=$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[A-Za-z][-A-Za-z0-9]*' |
      tr -d ' ,' | sort -u)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
}
complete -o bashdefault -o default -F _dlock dlock
